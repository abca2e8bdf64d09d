//! cargo-fuzz target `snapshot_file`: the body is `raftmq_store::fuzzing::snapshot_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::snapshot_file(data));
