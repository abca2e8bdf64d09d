//! cargo-fuzz target `peer_certificate`: the body is `raftmq_node::fuzzing::peer_certificate`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::peer_certificate(data));
