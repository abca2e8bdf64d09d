//! Compiles `proto/raftmq/v1/*.proto` and the vendored RocketMQ 5 protocol
//! (`proto/apache/rocketmq/v2/*.proto`) with protox (pure Rust; no `protoc` binary needed) and
//! generates prost messages plus tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/raftmq/v1/client.proto",
        "proto/raftmq/v1/peer.proto",
        "proto/apache/rocketmq/v2/definition.proto",
        "proto/apache/rocketmq/v2/service.proto",
    ];
    println!("cargo:rerun-if-changed=build.rs");
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path("crate::codec::StrictProstCodec")
        // Holds a secret key: its Debug (lib.rs) redacts it.
        .skip_debug([".raftmq.v1.CreateUserReply"])
        // A message's properties as the store keeps them (sorted): the broker takes the
        // decoded map as it is instead of rebuilding it from a HashMap per message.
        .btree_map(".raftmq.v1.Message.properties")
        // A follower decodes the encoded AppendEntries out of the frame buffer without a copy.
        .bytes(".raftmq.v1.RaftRequest.payload")
        // A message body: the leader decodes it out of the frame buffer without a copy, and
        // a client resending a message clones a reference, not the body.
        .bytes(".raftmq.v1.Message.body")
        // A producer id: a client clones a reference per message, the leader takes it out
        // of the frame buffer.
        .bytes(".raftmq.v1.Message.producer_id")
        .bytes(".apache.rocketmq.v2.Message.body")
        .compile_fds(fds)?;
    Ok(())
}
