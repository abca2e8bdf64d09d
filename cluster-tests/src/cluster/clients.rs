//! How a test reaches a [`TestCluster`]'s nodes: addresses, the client library and raw gRPC,
//! trusting the cluster's CA and signing as root when it is secure.

use std::time::Duration;

use raftmq_client::Client;
use raftmq_client::ClientOptions;

use super::TestCluster;
use crate::raw::GrpcClient;
use crate::tls::TestTls;

impl TestCluster {
    /// Client address of node `id`.
    pub fn client_addr(&self, id: u64) -> String {
        self.configs[id as usize - 1].client_listen_addr.to_string()
    }

    /// Client addresses of every node.
    pub fn seeds(&self) -> Vec<String> {
        self.ids().iter().map(|&i| self.client_addr(i)).collect()
    }

    /// A raw gRPC client of node `id`'s client API (below `raftmq_client`: no retries, no
    /// leader following), signing as root when the cluster authenticates.
    pub async fn grpc(&self, id: u64) -> anyhow::Result<GrpcClient> {
        let admin = self.admin();
        if let Some(t) = &self.tls {
            return t.grpc(&self.client_addr(id), admin);
        }
        crate::raw::connect(&self.client_addr(id), admin).await
    }

    /// The root credential of an authenticating cluster.
    pub fn admin(&self) -> Option<raftmq_client::Credentials> {
        self.auth.as_ref().map(|a| a.admin.clone())
    }

    /// A client library instance seeded with every node; `request_timeout` bounds one attempt.
    /// It signs as root when the cluster authenticates.
    pub fn client(&self, request_timeout: Duration) -> anyhow::Result<Client> {
        self.client_as(request_timeout, self.admin())
    }

    /// [`Self::client`] signing every call with `credentials` (None: unsigned).
    pub fn client_as(
        &self,
        request_timeout: Duration,
        credentials: Option<raftmq_client::Credentials>,
    ) -> anyhow::Result<Client> {
        let opts = ClientOptions {
            credentials,
            ..self.client_options(request_timeout)
        };
        Ok(Client::new(&self.seeds(), opts)?)
    }

    /// The options of [`Self::client`]: the CA when the cluster serves TLS, the root
    /// credential when it authenticates, short connect timeout and backoff, 8 attempts.
    pub fn client_options(&self, request_timeout: Duration) -> ClientOptions {
        ClientOptions {
            credentials: self.admin(),
            request_timeout,
            connect_timeout: Duration::from_millis(300),
            max_attempts: 8,
            backoff_max: Duration::from_millis(300),
            tls: self.tls.as_ref().map(TestTls::client_tls),
            ..ClientOptions::default()
        }
    }

    /// RocketMQ address of node `id` (while it runs).
    pub fn rocketmq_addr(&self, id: u64) -> Option<String> {
        let n = self
            .nodes
            .get(usize::try_from(id).ok()?.checked_sub(1)?)?
            .as_ref()?;
        n.addrs().rocketmq.map(|a| a.to_string())
    }
}
