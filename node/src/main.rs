//! `raftmq-node`: one broker node. Reads the config (defaults, `--config` TOML, flags; exit
//! code 2 naming the field when invalid), sets up `tracing` (level from `log-level`, or
//! `RUST_LOG` when set), starts the node, and on SIGTERM / SIGINT shuts it down gracefully
//! (leader hand-over, flush, abort marker cleared) and exits 0. Start failures, and a fatal
//! Raft error (e.g. a CommitLog I/O error), exit 1.

use clap::Parser;
use raftmq_node::config::NodeArgs;
use raftmq_node::Node;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc malloc: the node allocates per message (frames, entries, acks),
/// and glibc's malloc/free were about 20% of a leader's CPU under 4 x 64 single sends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_tracing(level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .init();
}

async fn wait_for_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::signal;
    use tokio::signal::unix::SignalKind;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

async fn run(cfg: raftmq_node::config::NodeConfig) -> anyhow::Result<()> {
    let node = Node::start(cfg).await?;
    tokio::select! {
        signal = wait_for_signal() => {
            tracing::info!(signal = signal?, "signal received; shutting down");
            node.shutdown().await
        }
        error = node.failed() => {
            tracing::error!(error = %error, "raft stopped on a fatal error; shutting down");
            let _ = node.shutdown().await;
            Err(anyhow::anyhow!("raft stopped on a fatal error: {error}"))
        }
    }
}

/// Transparent huge pages off for this process (what mimalloc's `allow_thp=0` does): with them
/// mimalloc's arenas were backed by 2 MiB pages and a leader's anonymous memory doubled under
/// load (issue 14 target 6). Except where advised, on kernels that can (Linux 6.18's
/// `PR_THP_DISABLE_EXCEPT_ADVISED`): the log's `O_DIRECT` buffers ask for huge pages
/// (`raft-log/src/huge.rs`), and mimalloc built with `no_thp` never does. The CommitLog's file
/// mappings are not affected. Best effort: a kernel without the call only costs memory, and
/// one without the flag gives the log's buffers ordinary pages.
fn disable_transparent_huge_pages() {
    /// `PR_SET_THP_DISABLE`'s flag (Linux 6.18): keep huge pages where `MADV_HUGEPAGE` asks.
    #[cfg(target_os = "linux")]
    const PR_THP_DISABLE_EXCEPT_ADVISED: libc::c_ulong = 1 << 1;
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE passes no pointers; it sets one flag of this process. An older
    // kernel refuses the flag (EINVAL) and changes nothing; the second call then disables all.
    unsafe {
        if libc::prctl(
            libc::PR_SET_THP_DISABLE,
            1,
            PR_THP_DISABLE_EXCEPT_ADVISED,
            0,
            0,
        ) != 0
        {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

fn main() -> std::process::ExitCode {
    disable_transparent_huge_pages();
    let cfg = match NodeArgs::parse().resolve() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("raftmq-node: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    init_tracing(&cfg.log_level);
    // `worker-threads = 0`: one per core the process may use, as tokio would pick.
    let threads = match cfg.worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n as usize,
    };
    // One thread: tokio's current-thread scheduler, which runs woken tasks in order. The
    // multi-thread one runs a task woken by the running one next (its LIFO slot): the
    // HTTP/2 connection task then wrote each unary answer on its own as it came, not the
    // answers of one entry together (RocketMQ producers: 2.4 x the `writev`s).
    let mut runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    runtime.enable_all();
    let rt = match runtime.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("raftmq-node: cannot start the runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(run(cfg)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "raftmq-node failed");
            eprintln!("raftmq-node: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
