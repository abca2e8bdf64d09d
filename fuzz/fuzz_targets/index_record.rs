//! cargo-fuzz target `index_record`: the body is `raftmq_raft_log::fuzzing::index_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_raft_log::fuzzing::index_record(data));
