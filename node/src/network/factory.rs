//! [`PeerNetworkFactory`]: hands openraft one [`PeerNetwork`] per peer, all sharing the peer's
//! long-lived channel (plus a separate one for snapshots).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::Mutex;

use openraft::network::RaftNetworkFactory;
use raftmq_proto::v1::raft_peer_client::RaftPeerClient;
use raftmq_raft_log::types::LogTypes;
use raftmq_raft_log::types::NodeId;
use raftmq_raft_log::types::PeerNode;
use tonic::transport::Channel;

use super::client::Ctx;
use super::client::PeerClient;
use super::client::PeerNetwork;
use super::snapshot::SnapshotSource;
use super::PeerNetworkOptions;

/// Creates [`PeerNetwork`] clients; keeps one channel per peer for the factory's lifetime.
///
/// `SD` is the state machine's snapshot data type (what `full_snapshot` sends).
pub struct PeerNetworkFactory<C, SD> {
    self_id: NodeId,
    opts: Arc<PeerNetworkOptions>,
    /// Invariant: one channel per (peer id, lane), replaced only when the peer's address
    /// or the TLS material changes.
    channels: Arc<Mutex<ChannelMap>>,
    _types: PhantomData<fn() -> (C, SD)>,
}

impl<C, SD> PeerNetworkFactory<C, SD> {
    /// A factory for node `self_id` (sent as the sender id of every request).
    pub fn new(self_id: NodeId, opts: PeerNetworkOptions) -> Self {
        Self {
            self_id,
            opts: Arc::new(opts),
            channels: Arc::new(Mutex::new(HashMap::new())),
            _types: PhantomData,
        }
    }
}

/// The channel to `target` at `addr` in `channels`, created (lazily connecting) on first use
/// and again after a TLS reload.
fn channel(
    opts: &PeerNetworkOptions,
    channels: &Mutex<ChannelMap>,
    target: NodeId,
    lane: Lane,
    addr: &str,
) -> Result<Channel, String> {
    let mut channels = channels
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let generation = opts.tls.as_ref().map_or(0, |t| t.generation());
    if let Some((known_addr, g, ch)) = channels.get(&(target, lane)) {
        if known_addr == addr && *g == generation {
            return Ok(ch.clone());
        }
    }
    let endpoint = crate::tls::endpoint(opts.tls.as_deref(), addr)
        .map_err(|e| format!("invalid raft address {addr:?} of node {target}: {e}"))?
        .connect_timeout(opts.connect_timeout)
        .max_frame_size(raftmq_proto::MAX_FRAME_BYTES)
        .http2_keep_alive_interval(opts.keepalive_interval)
        .keep_alive_while_idle(true)
        .http2_adaptive_window(true);
    let ch = crate::tls::connect_lazy(&endpoint, &opts.congestion);
    tracing::info!(target_node = target, addr, ?lane, "peer channel created");
    channels.insert((target, lane), (addr.to_string(), generation, ch.clone()));
    Ok(ch)
}

/// A client on [`channel`], with the message size limits of `opts`.
fn peer_client(
    opts: &PeerNetworkOptions,
    channels: &Mutex<ChannelMap>,
    target: NodeId,
    lane: Lane,
    addr: &str,
) -> Result<PeerClient, String> {
    channel(opts, channels, target, lane, addr).map(|ch| PeerClient {
        rpc: RaftPeerClient::new(ch.clone())
            .max_decoding_message_size(opts.max_message_bytes)
            .max_encoding_message_size(opts.max_message_bytes),
        append: ch,
    })
}

/// Channels by (peer, lane), with the address and TLS generation each was made for.
type ChannelMap = HashMap<(NodeId, Lane), (String, u64, Channel)>;

/// Which connection to a peer a client uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Lane {
    /// Replication, heartbeats, votes, leader transfer.
    Raft,
    /// Snapshot transfers.
    Snapshot,
}

impl<C, SD> Clone for PeerNetworkFactory<C, SD> {
    fn clone(&self) -> Self {
        Self {
            self_id: self.self_id,
            opts: self.opts.clone(),
            channels: self.channels.clone(),
            _types: PhantomData,
        }
    }
}

impl<C, SD> RaftNetworkFactory<C> for PeerNetworkFactory<C, SD>
where
    C: LogTypes,
    SD: SnapshotSource,
{
    type Network = PeerNetwork<C, SD>;

    async fn new_client(&mut self, target: NodeId, node: &PeerNode) -> Self::Network {
        self.network(target, node, Lane::Raft)
    }

    /// Snapshots get their own connection, so a large transfer cannot use up the HTTP/2
    /// flow-control window that replication and heartbeats share.
    async fn new_snapshot_client(&mut self, target: NodeId, node: &PeerNode) -> Self::Network {
        self.network(target, node, Lane::Snapshot)
    }
}

impl<C, SD> PeerNetworkFactory<C, SD> {
    fn network(&self, target: NodeId, node: &PeerNode, lane: Lane) -> PeerNetwork<C, SD> {
        let client = peer_client(&self.opts, &self.channels, target, lane, &node.raft_addr);
        let tls_refresh = self.opts.tls.as_ref().map(|t| {
            let (opts, channels) = (self.opts.clone(), self.channels.clone());
            let addr = node.raft_addr.clone();
            let source: super::client::PeerClientSource =
                Arc::new(move || peer_client(&opts, &channels, target, lane, &addr));
            (t.generation(), source)
        });
        PeerNetwork {
            ctx: Ctx {
                self_id: self.self_id,
                target,
                addr: node.raft_addr.clone(),
            },
            opts: self.opts.clone(),
            client,
            tls_refresh,
            failed_opens: 0,
            timed_out_opens: 0,
            _types: PhantomData,
        }
    }
}
