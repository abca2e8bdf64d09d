//! cargo-fuzz target `rocketmq_request`: the body is `raftmq_node::fuzzing::rocketmq_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::rocketmq_request(data));
