//! Peer-link faults of a [`TestCluster`] (through [`raftmq_node::network::fault`]).

use super::TestCluster;

impl TestCluster {
    /// Cuts every link between `a` and `b`, both ways.
    pub fn partition_pair(&self, a: u64, b: u64) {
        self.faults.cut((a, b));
        self.faults.cut((b, a));
    }

    /// Splits the cluster into `side` and everyone else (both ways).
    pub fn partition(&self, side: &[u64]) {
        for &a in side {
            for b in self.ids().into_iter().filter(|b| !side.contains(b)) {
                self.partition_pair(a, b);
            }
        }
    }

    /// Drops only what `from` sends to `to` (requests and responses that travel that way).
    pub fn cut_one_way(&self, from: u64, to: u64) {
        self.faults.cut((from, to));
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.faults.heal();
    }
}
