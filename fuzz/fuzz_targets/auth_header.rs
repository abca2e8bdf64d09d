//! cargo-fuzz target `auth_header`: the body is `raftmq_node::fuzzing::auth_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::auth_header(data));
