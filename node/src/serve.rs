//! The servers of a running node: the peer, client and RocketMQ gRPC services, each accepting
//! through [`crate::tls::incoming`] (TLS when configured, the connection limit, the peer
//! port's member check before any Raft byte is read), and `/metrics`.

use std::io;
use std::sync::Arc;

use futures::Stream;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::service::Routes;
use tracing::Instrument;

use crate::core::NodeCore;
use crate::network::PeerService;
use crate::rocketmq::RocketMqService;
use crate::server::NodeListeners;
use crate::service::ClientService;
use crate::snapshot_io::FileSnapshotSink;
use crate::tls::Conn;
use crate::tls::ListenerOpts;

/// Resolves once `stop` is true (or its sender is gone).
pub(crate) async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Spawns a server on every listener of `listeners`; each ends when `stop` turns true.
pub(crate) fn serve(
    core: &Arc<NodeCore>,
    listeners: NodeListeners,
    stop: watch::Receiver<bool>,
    span: &tracing::Span,
) -> Vec<JoinHandle<()>> {
    let max = usize::try_from(core.config.grpc_max_message_bytes).unwrap_or(usize::MAX);
    let snapshot_max = core.config.max_snapshot_bytes;
    let peer = PeerService::new(
        core.raft.clone(),
        core.node_id,
        core.config.cluster_id.clone(),
        FileSnapshotSink(core.store.snapshot_receiver(snapshot_max)),
    )
    .with_lost_commit_floor(Arc::new(core.store.log().lost_commit_floor_reader()))
    .with_pre_vote_counter(core.metrics.leader_lost_pre_votes.clone())
    .with_disk_gate(Arc::new(crate::disk_guard::append_gate(core)))
    .into_server(max);
    let client = ClientService::new(core.clone(), stop.clone()).into_server();
    let rocketmq = RocketMqService::new(core.clone(), stop.clone());
    let grpc = |name: &'static str, l: TcpListener, routes: Routes| {
        let opts = ListenerOpts {
            name,
            tls: core.tls.clone(),
            peer: (name == "peer").then(|| {
                Arc::new(crate::tls::MemberAdmission {
                    cluster_id: core.config.cluster_id.clone(),
                    raft: core.raft.clone(),
                }) as Arc<dyn crate::tls::Admit>
            }),
            max_connections: core.config.tls.max_connections as usize,
            congestion: core.congestion.clone(),
        };
        let incoming = crate::tls::incoming(l, opts);
        let streams = core.config.tls.max_concurrent_streams;
        spawn_grpc(name, incoming, routes, streams, stop.clone(), span)
    };
    let mut out = vec![
        grpc("peer", listeners.raft, Routes::new(peer)),
        // Followers forward RocketMQ calls to the leader's client port (the address Raft
        // knows), so the client port serves the RocketMQ service too.
        grpc(
            "client",
            listeners.client,
            Routes::new(client).add_service(rocketmq.clone().into_server()),
        ),
    ];
    if let Some(l) = listeners.rocketmq {
        out.push(grpc("rocketmq", l, Routes::new(rocketmq.into_server())));
    }
    if let Some(l) = listeners.metrics {
        let app = crate::metrics::router(core.clone());
        out.push(tokio::spawn(
            async move {
                let r = axum::serve(l, app)
                    .with_graceful_shutdown(stopped(stop))
                    .await;
                if let Err(e) = r {
                    tracing::error!(error = %e, "metrics endpoint stopped with an error");
                }
            }
            .instrument(span.clone()),
        ));
    }
    out
}

/// The HTTP/2 stream window of the peer port (its connection window twice that; hyper's
/// defaults are 1 MiB each). A leader's AppendEntries stream sends each entry's payload as a
/// frame of its own, and the follower takes the payloads as slices of their frames
/// (`network::raw_append`); a payload the leader's HTTP/2 had to cut at the end of its send
/// window is copied instead. The window is granted back in halves, so the cuts come once per
/// half window: at 1 MiB, about one entry in four of batched sends was cut. What a window
/// lets in is bounded by the leader's replication pipeline, so it costs the follower memory
/// only as far as the leader has entries in flight.
const PEER_STREAM_WINDOW: u32 = 8 << 20;

/// Serves `routes` on the connections of `incoming` (at most `streams` concurrent calls per
/// connection) until `stop` turns true.
fn spawn_grpc<S>(
    name: &'static str,
    incoming: S,
    routes: Routes,
    streams: u32,
    stop: watch::Receiver<bool>,
    span: &tracing::Span,
) -> JoinHandle<()>
where
    S: Stream<Item = Result<Conn, io::Error>> + Send + 'static,
{
    let parent = span.clone();
    tokio::spawn(
        async move {
            // The peer port's flow-control windows: see `PEER_STREAM_WINDOW`.
            let (stream_window, conn_window) = match name {
                "peer" => (Some(PEER_STREAM_WINDOW), Some(2 * PEER_STREAM_WINDOW)),
                _ => (None, None),
            };
            let r = tonic::transport::Server::builder()
                .max_concurrent_streams(Some(streams))
                .max_frame_size(Some(raftmq_proto::MAX_FRAME_BYTES))
                .initial_stream_window_size(stream_window)
                .initial_connection_window_size(conn_window)
                .layer(raftmq_proto::header_cut::HeaderCutLayer)
                .trace_fn(move |r| {
                    tracing::debug_span!(parent: &parent, "grpc", listener = name, path = %r.uri().path())
                })
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, stopped(stop))
                .await;
            if let Err(e) = r {
                tracing::error!(listener = name, error = %e, "gRPC server stopped with an error");
            }
        }
        .instrument(span.clone()),
    )
}
