//! cargo-fuzz target `segment_scan`: the body is `raftmq_raft_log::fuzzing::segment_scan`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_raft_log::fuzzing::segment_scan(data));
