//! cargo-fuzz target `snapshot_chunks`: the body is `raftmq_store::fuzzing::snapshot_chunks`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::snapshot_chunks(data));
