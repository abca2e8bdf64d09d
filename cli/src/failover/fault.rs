//! The fault injector: every `kill-every`, picks a node by mode, kills, stops or transfers
//! leadership away from it, waits `down-for`, and restarts it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use raftmq_client::Client;

use super::verdict::Fault;
use super::Mode;
use super::Run;
use crate::deploy::local;
use crate::status::gather_local;

/// A small xorshift generator (the picks need no quality, only variety).
pub struct Rng(u64);

impl Rng {
    /// Seeded from the clock.
    pub fn from_clock() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(42);
        Self(t | 1)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Sleeps `d` in small steps; false if the run was stopped meanwhile.
async fn pause(run: &Run, d: Duration) -> bool {
    let end = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < end {
        if run.stop.load(Ordering::Relaxed) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

async fn stop_node(run: &Run, id: u64, how: local::Stop) -> anyhow::Result<()> {
    let mut m = run.manifest();
    let m = tokio::task::spawn_blocking(move || local::stop(&mut m, id, how).map(|_| m)).await??;
    *run.manifest.lock().unwrap_or_else(|p| p.into_inner()) = m;
    Ok(())
}

/// Restarts node `id` and counts the restart (the status sampler marks its next sample).
pub async fn restart_node(run: &Run, id: u64) -> anyhow::Result<()> {
    let mut m = run.manifest();
    let bin = run.node_bin.clone();
    // Before the node serves: a status sample from the new incarnation then sees the bump
    // (its in-memory commit index restarts from the durable one; not a regression).
    run.bump_generation(id);
    let m =
        tokio::task::spawn_blocking(move || local::start(&mut m, id, &bin).map(|_| m)).await??;
    *run.manifest.lock().unwrap_or_else(|p| p.into_inner()) = m;
    Ok(())
}

/// One fault: returns what was done, or `None` when no target was found (e.g. no leader).
async fn inject(run: &Run, client: &Client, rng: &mut Rng) -> anyhow::Result<Option<Fault>> {
    let view = gather_local(&run.manifest()).await?;
    let (Some(leader), term) = (view.leader_id, view.term) else {
        return Ok(None);
    };
    let up: Vec<u64> = view
        .nodes
        .iter()
        .filter(|n| n.running == Some(true))
        .map(|n| n.id)
        .collect();
    let followers: Vec<u64> = up.iter().copied().filter(|&id| id != leader).collect();
    let target = match run.mode {
        Mode::KillLeader | Mode::StopLeader | Mode::Transfer => Some(leader),
        Mode::KillFollower => followers.get(rng.below(followers.len())).copied(),
        Mode::KillRandom => up.get(rng.below(up.len())).copied(),
    };
    let Some(node) = target else { return Ok(None) };
    let at_us = run.now_us();
    let action = match run.mode {
        Mode::Transfer => {
            client.transfer_leader(None).await?;
            "transfer"
        }
        Mode::StopLeader => {
            stop_node(run, node, local::Stop::Term).await?;
            "stop"
        }
        _ => {
            stop_node(run, node, local::Stop::Kill).await?;
            "kill"
        }
    };
    Ok(Some(Fault {
        at_us,
        action: action.into(),
        node,
        was_leader: node == leader,
        term,
    }))
}

/// Runs until `run.stop`; faults go into `run.faults`. Errors are reported and the loop goes on.
pub async fn inject_faults(run: Arc<Run>, client: Client) {
    let mut rng = Rng::from_clock();
    while pause(&run, run.kill_every).await {
        match inject(&run, &client, &mut rng).await {
            Ok(Some(f)) => {
                let node = f.node;
                let restart = f.action != "transfer";
                run.faults.lock().unwrap_or_else(|p| p.into_inner()).push(f);
                if restart {
                    pause(&run, run.down_for).await;
                    if let Err(e) = restart_node(&run, node).await {
                        eprintln!("failover-test: cannot restart node {node}: {e:#}");
                    }
                }
            }
            Ok(None) => eprintln!("failover-test: no target for a fault (no leader?); skipped"),
            Err(e) => eprintln!("failover-test: fault injection failed: {e:#}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_stays_in_range() {
        let mut r = Rng::from_clock();
        assert!((0..1000).all(|_| r.below(3) < 3));
        assert_eq!(r.below(0), 0);
    }
}
