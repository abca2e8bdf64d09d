//! cargo-fuzz target `checkpoint`: the body is `raftmq_store::fuzzing::checkpoint`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::checkpoint(data));
