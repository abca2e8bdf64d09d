//! cargo-fuzz target `receipt_handle`: the body is `raftmq_node::fuzzing::receipt_handle`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::receipt_handle(data));
