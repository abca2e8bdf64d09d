//! cargo-fuzz target `consume_queue`: the body is `raftmq_store::fuzzing::consume_queue`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::consume_queue(data));
