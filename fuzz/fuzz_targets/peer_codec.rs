//! cargo-fuzz target `peer_codec`: the body is `raftmq_node::fuzzing::peer_codec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| raftmq_node::fuzzing::peer_codec(data));
