//! [`NodeConfig::validate`]: the node's own ranges and the rules that tie settings of
//! different crates together (segment-bytes and grpc-max-message-bytes against the store's
//! max-batch-bytes); the log's and the store's fields are checked by
//! [`LogConfig::validate`](raftmq_raft_log::LogConfig::validate) and
//! [`StoreConfig::validate`](raftmq_store::StoreConfig::validate), whose errors name the same
//! kebab-case keys.

use raftmq_raft_log::error::LogError;
use raftmq_store::StoreError;

use super::ConfigError;
use super::NodeConfig;

/// Smallest CommitLog segment a node runs with (raft-log itself accepts 4 KiB, for tests).
const NODE_MIN_SEGMENT_BYTES: u64 = 64 << 10;

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

fn check_range<T: PartialOrd + std::fmt::Display>(
    field: &'static str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(invalid(field, format!("{value} is outside {min}..={max}")));
    }
    Ok(())
}

fn check_host_port(field: &'static str, value: &str) -> Result<(), ConfigError> {
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err(invalid(field, format!("{value:?} is not host:port")));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(invalid(field, format!("{value:?} is not host:port")));
    }
    Ok(())
}

fn log_error(e: LogError) -> ConfigError {
    match e {
        LogError::Config { field, reason } => invalid(field, reason),
        // `LogConfig::validate` returns only `Config`; kept total for future variants.
        other => invalid("log", other.to_string()),
    }
}

fn store_error(e: StoreError) -> ConfigError {
    match e {
        StoreError::Config { field, reason } => invalid(field, reason),
        // `StoreConfig::validate` returns only `Config`; kept total for future variants.
        other => invalid("store", other.to_string()),
    }
}

impl NodeConfig {
    /// Checks every field; the error names the first invalid one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("node-id", self.node_id, 1, u64::MAX)?;
        let id_ok = !self.cluster_id.is_empty()
            && self.cluster_id.len() <= 64
            && self
                .cluster_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !id_ok {
            return Err(invalid(
                "cluster-id",
                format!("{:?}: use 1..=64 chars of [A-Za-z0-9._-]", self.cluster_id),
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(invalid("data-dir", "must not be empty"));
        }
        self.validate_addrs()?;
        self.validate_tls()?;
        self.validate_members()?;
        self.validate_fifo_groups()?;
        self.auth.validate()?;
        self.log.validate().map_err(log_error)?;
        self.validate_sizes()?;
        check_range(
            "election-timeout-min-ms",
            self.election_timeout_min_ms,
            50,
            60_000,
        )?;
        check_range(
            "election-timeout-max-ms",
            self.election_timeout_max_ms,
            self.election_timeout_min_ms + 1,
            120_000,
        )?;
        // At least two heartbeats per shortest election timeout: a heartbeat leaves at the
        // first openraft tick (heartbeat-ms * 13/64) after it is due, and one lost heartbeat
        // must not start an election.
        check_range(
            "heartbeat-ms",
            self.heartbeat_ms,
            10,
            self.election_timeout_min_ms / 2,
        )?;
        check_range("send-timeout-ms", self.send_timeout_ms, 100, 600_000)?;
        check_range(
            "replication-timeout-ms",
            self.replication_timeout_ms,
            100,
            600_000,
        )?;
        check_range("default-queue-count", self.default_queue_count, 1, 1024)?;
        check_range("worker-threads", self.worker_threads, 0, 1024)?;
        self.validate_bounds()?;
        self.store.validate().map_err(store_error)?;
        if tracing_subscriber::EnvFilter::try_new(&self.log_level).is_err() {
            return Err(invalid(
                "log-level",
                format!(
                    "{:?} is not a tracing filter (e.g. \"info\")",
                    self.log_level
                ),
            ));
        }
        Ok(())
    }

    fn validate_addrs(&self) -> Result<(), ConfigError> {
        match &self.raft_advertised_addr {
            Some(a) => check_host_port("raft-advertised-addr", a)?,
            None if self.raft_listen_addr.ip().is_unspecified() => {
                return Err(invalid(
                    "raft-advertised-addr",
                    "required when raft-listen-addr is a wildcard address",
                ))
            }
            None => {}
        }
        match (&self.rocketmq_advertised_addr, self.rocketmq_listen_addr) {
            (Some(a), _) => check_host_port("rocketmq-advertised-addr", a)?,
            (None, Some(l)) if l.ip().is_unspecified() => {
                return Err(invalid(
                    "rocketmq-advertised-addr",
                    "required when rocketmq-listen-addr is a wildcard address",
                ))
            }
            _ => {}
        }
        match &self.client_advertised_addr {
            Some(a) => check_host_port("client-advertised-addr", a)?,
            None if self.client_listen_addr.ip().is_unspecified() => {
                return Err(invalid(
                    "client-advertised-addr",
                    "required when client-listen-addr is a wildcard address",
                ))
            }
            None => {}
        }
        if self.raft_listen_addr == self.client_listen_addr && self.raft_listen_addr.port() != 0 {
            return Err(invalid(
                "client-listen-addr",
                "must differ from raft-listen-addr",
            ));
        }
        if let Some(r) = self.rocketmq_listen_addr.filter(|a| a.port() != 0) {
            if r == self.raft_listen_addr || r == self.client_listen_addr {
                return Err(invalid(
                    "rocketmq-listen-addr",
                    "must differ from raft-listen-addr and client-listen-addr",
                ));
            }
        }
        if let Some(j) = &self.join_addr {
            check_host_port("join-addr", j)?;
        }
        Ok(())
    }

    /// The TLS settings against the gRPC listeners (not `/metrics`, which stays plaintext).
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let mut listeners = vec![
            ("raft-listen-addr", self.raft_listen_addr),
            ("client-listen-addr", self.client_listen_addr),
        ];
        if let Some(r) = self.rocketmq_listen_addr {
            listeners.push(("rocketmq-listen-addr", r));
        }
        self.tls.validate(&listeners)
    }

    fn validate_fifo_groups(&self) -> Result<(), ConfigError> {
        for g in &self.rocketmq_fifo_groups {
            raftmq_store::limits::validate_group_name(g)
                .map_err(|e| invalid("rocketmq-fifo-groups", format!("{g:?}: {e}")))?;
        }
        Ok(())
    }

    fn validate_members(&self) -> Result<(), ConfigError> {
        if self.initial_members.is_empty() {
            return Ok(());
        }
        if self.join_addr.is_some() {
            return Err(invalid(
                "initial-members",
                "a node either bootstraps (initial-members) or joins (join-addr), not both",
            ));
        }
        let mut ids = std::collections::BTreeSet::new();
        for m in &self.initial_members {
            if !ids.insert(m.id) {
                return Err(invalid(
                    "initial-members",
                    format!("node id {} appears twice", m.id),
                ));
            }
        }
        if !ids.contains(&self.node_id) {
            return Err(invalid(
                "initial-members",
                format!("must include this node (node-id {})", self.node_id),
            ));
        }
        Ok(())
    }

    /// The resource bounds of the node's own (snapshot size, long polls, stream bytes).
    fn validate_bounds(&self) -> Result<(), ConfigError> {
        if self.max_snapshot_bytes != 0 {
            check_range(
                "max-snapshot-bytes",
                self.max_snapshot_bytes,
                1 << 20,
                1 << 50,
            )
            .map_err(|_| {
                invalid(
                    "max-snapshot-bytes",
                    format!(
                        "{} is neither 0 (half the free disk space) nor in {}..={}",
                        self.max_snapshot_bytes,
                        1u64 << 20,
                        1u64 << 50
                    ),
                )
            })?;
        }
        check_range(
            "max-long-poll-waiters",
            self.max_long_poll_waiters,
            0,
            1_000_000,
        )?;
        check_range(
            "max-stream-inflight-bytes",
            self.max_stream_inflight_bytes,
            1 << 20,
            4 << 30,
        )?;
        check_range("max-group-proposals", self.max_group_proposals, 0, 1024)
    }

    /// The send limits (their ranges are the store's, checked first) and how they bound the
    /// gRPC limit and the segment size.
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        self.store.limits.validate().map_err(store_error)?;
        let max_batch_bytes = u64::from(self.store.limits.max_batch_bytes);
        check_range(
            "grpc-max-message-bytes",
            self.grpc_max_message_bytes,
            max_batch_bytes + (1 << 20),
            i32::MAX as u64,
        )?;
        let segment_bytes = self.log.segment_bytes;
        if segment_bytes < NODE_MIN_SEGMENT_BYTES {
            return Err(invalid(
                "segment-bytes",
                format!("{segment_bytes} is below {NODE_MIN_SEGMENT_BYTES}, a node's smallest"),
            ));
        }
        if segment_bytes < 2 * max_batch_bytes {
            return Err(invalid(
                "segment-bytes",
                format!(
                    "{} must be at least 2 x max-batch-bytes ({})",
                    segment_bytes,
                    2 * max_batch_bytes
                ),
            ));
        }
        Ok(())
    }
}
