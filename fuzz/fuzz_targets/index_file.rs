//! cargo-fuzz target `index_file`: the body is `raftmq_store::fuzzing::index_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::index_file(data));
