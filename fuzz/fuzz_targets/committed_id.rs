//! cargo-fuzz target `committed_id`: the body is `raftmq_raft_log::fuzzing::committed_id`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_raft_log::fuzzing::committed_id(data));
