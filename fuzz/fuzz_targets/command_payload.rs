//! cargo-fuzz target `command_payload`: the body is `raftmq_store::fuzzing::command_payload`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_store::fuzzing::command_payload(data));
