//! cargo-fuzz target `message_record`: the body is `raftmq_store::fuzzing::message_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::message_record(data));
