//! cargo-fuzz target `client_request`: the body is `raftmq_node::fuzzing::client_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::client_request(data));
