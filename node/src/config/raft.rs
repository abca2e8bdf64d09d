//! What [`NodeConfig`] means for openraft and for the peer transport.

use std::time::Duration;

use openraft::SnapshotPolicy;

use super::ConfigError;
use super::NodeConfig;
use crate::network::PeerNetworkOptions;

impl NodeConfig {
    /// The openraft settings of this node, validated.
    ///
    /// Fixed choices (see DESIGN, openraft section): openraft never snapshots or purges on its
    /// own (`SnapshotPolicy::Never`, a practically unbounded `max_in_snapshot_log_to_keep`;
    /// retention triggers snapshot and purge); log reversion is allowed on every node, because
    /// openraft checks it on the *leader* when a follower's log turns out shorter than the
    /// leader's record of it (an `async` follower that lost power, or a follower repaired with
    /// `repair-truncate-corruption`), whatever the leader's own flush policy; leader restore
    /// stays off.
    pub fn raft_config(&self) -> Result<openraft::Config, ConfigError> {
        let chunk = (self.grpc_max_message_bytes / 2).clamp(64 << 10, 4 << 20);
        let config = openraft::Config {
            cluster_name: self.cluster_id.clone(),
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            heartbeat_interval: self.heartbeat_ms,
            // Per snapshot chunk (the transport's deadline is per chunk, not per snapshot).
            install_snapshot_timeout: self.election_timeout_max_ms.max(5_000),
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: u64::MAX / 4,
            snapshot_max_chunk_size: chunk,
            allow_log_reversion: Some(true),
            enable_leader_restore: Some(false),
            ..Default::default()
        };
        config.validate().map_err(|e| ConfigError::Invalid {
            field: "election-timeout-min-ms",
            reason: format!("openraft rejects the Raft timings: {e}"),
        })
    }

    /// The peer transport settings of this node.
    pub fn peer_network_options(&self) -> PeerNetworkOptions {
        let mut opts = PeerNetworkOptions::new(self.cluster_id.clone());
        opts.max_message_bytes = usize::try_from(self.grpc_max_message_bytes).unwrap_or(usize::MAX);
        opts.backoff_max = Duration::from_millis(self.election_timeout_min_ms.clamp(100, 2_000));
        opts.replication_timeout = Duration::from_millis(self.replication_timeout_ms);
        opts
    }

    /// How long a send waits for its quorum ack.
    pub fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FlushPolicy;

    #[test]
    fn raft_config_follows_node_config() {
        let mut c = NodeConfig::default();
        c.log.flush = FlushPolicy::Async;
        let rc = c.raft_config().expect("valid");
        assert_eq!(rc.cluster_name, "raftmq");
        assert_eq!(rc.heartbeat_interval, 50);
        assert_eq!(rc.snapshot_policy, SnapshotPolicy::Never);
        assert_eq!(rc.allow_log_reversion, Some(true));
        c.log.flush = FlushPolicy::Sync;
        assert_eq!(
            c.raft_config().expect("valid").allow_log_reversion,
            Some(true),
            "a sync leader must accept a follower whose log went back"
        );
        let opts = c.peer_network_options();
        assert_eq!(opts.cluster_id, "raftmq");
        assert_eq!(
            opts.commit_hold,
            Duration::from_millis(1),
            "commits wait for entries"
        );
        c.log.flush = FlushPolicy::Async;
        assert_eq!(
            c.peer_network_options().commit_hold,
            Duration::from_millis(1),
            "async too: its followers write the committed id behind"
        );
        c.log.flush = FlushPolicy::Sync;
        assert_eq!(opts.max_message_bytes, 64 << 20);
        assert_eq!(opts.replication_timeout, Duration::from_secs(1));
        // openraft asks for one heartbeat (50 ms); a reply to 8 MiB may take 1.8 s.
        let hb = Duration::from_millis(c.heartbeat_ms);
        assert_eq!(opts.reply_timeout(hb, 0), Duration::from_secs(1));
        assert_eq!(opts.reply_timeout(hb, 8 << 20), Duration::from_millis(1800));
        assert_eq!(opts.append_part_bytes(), 8 << 20);
        c.replication_timeout_ms = 100;
        c.grpc_max_message_bytes = 4 << 20;
        let opts = c.peer_network_options();
        assert_eq!(
            opts.reply_timeout(Duration::from_millis(250), 0),
            Duration::from_millis(250),
            "never below openraft's own deadline"
        );
        assert_eq!(
            opts.append_part_bytes(),
            4 << 20,
            "at most the message limit"
        );
    }
}
