//! raftmq_client: the Rust client library of raftmq, used by the `raftmq` command and the
//! cluster tests, and the invariant checkers ([`check`]) that the failover test and the
//! cluster tests run over a send history and the queues read back from every node.

pub mod bench;
pub mod check;
