//! Argument parsing: every command's errors are clap errors with exit status 2.

use clap::Parser;

use super::Cli;
use super::Command;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("raftmq").chain(args.iter().copied()))
}

fn err(args: &[&str]) -> clap::Error {
    match parse(args) {
        Ok(c) => panic!("{args:?} parsed: {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn good_command_lines() {
    let c = parse(&[
        "cluster",
        "up",
        "--nodes",
        "5",
        "--flush",
        "sync,async,async,sync,sync",
    ])
    .unwrap();
    assert!(matches!(c.command, Command::Cluster(_)));
    let c = parse(&["--json", "send", "--topic", "t", "--body", "x"]).unwrap();
    assert!(c.global.json);
    let c = parse(&[
        "send",
        "--topic",
        "t",
        "--count",
        "10",
        "--size",
        "8",
        "--servers",
        "a:1,b:2",
    ])
    .unwrap();
    assert_eq!(c.global.servers, vec!["a:1", "b:2"]);
    parse(&[
        "consume", "--topic", "t", "--from", "17", "--group", "g", "--follow",
    ])
    .unwrap();
    parse(&["query", "--key", "k", "--topic", "t", "--since", "1h"]).unwrap();
    parse(&["topic", "create", "t", "--queues", "8", "--perm", "r"]).unwrap();
    parse(&["bench", "produce", "--duration", "5s", "--batch", "16"]).unwrap();
    parse(&[
        "bench",
        "suite",
        "--duration",
        "1s",
        "--cases",
        "single,batch-32",
        "--nats-figures",
        "single=1900",
    ])
    .unwrap();
    parse(&[
        "failover-test",
        "--mode",
        "kill-random",
        "--duration",
        "20s",
    ])
    .unwrap();
    parse(&["cluster", "transfer-leader", "--to", "2"]).unwrap();
}

#[test]
fn bad_command_lines_are_usage_errors() {
    use clap::error::ErrorKind;
    assert_eq!(
        err(&["send", "--topic", "t", "--body", "x", "--file", "f"]).kind(),
        ErrorKind::ArgumentConflict
    );
    assert_eq!(
        err(&["send", "--body", "x"]).kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        err(&["send", "--topic", "t", "--count", "3"]).kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        err(&[
            "send",
            "--topic",
            "t",
            "--property",
            "novalue",
            "--body",
            "x"
        ])
        .kind(),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        err(&["cluster", "up", "--nodes", "0"]).kind(),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        err(&["cluster", "kill"]).kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        err(&["cluster", "kill", "one"]).kind(),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        err(&["consume", "--topic", "t", "--from", "soon"]).kind(),
        ErrorKind::ValueValidation
    );
    assert_eq!(err(&["query"]).kind(), ErrorKind::MissingRequiredArgument);
    assert_eq!(
        err(&["query", "--key", "k"]).kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        err(&["failover-test", "--mode", "explode"]).kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        err(&["failover-test", "--duration", "forever"]).kind(),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        err(&["bench", "produce", "--duration", "1s", "--count", "5"]).kind(),
        ErrorKind::ArgumentConflict
    );
    let e = err(&["bench", "suite", "--cases", "single,fast"]);
    assert_eq!(e.kind(), ErrorKind::ValueValidation);
    assert!(e.to_string().contains("the cases are single"), "{e}");
    let e = err(&["bench", "suite", "--nats-figures", "single=lots"]);
    assert!(e.to_string().contains("not a number of msg/s"), "{e}");
    assert_eq!(err(&["frobnicate"]).kind(), ErrorKind::InvalidSubcommand);
    assert_eq!(err(&["send", "--body", "x"]).exit_code(), 2);
}

#[test]
fn every_command_has_examples_in_help() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    cmd.build();
    fn walk(c: &clap::Command, path: &str) {
        let name = format!("{path} {}", c.get_name());
        if c.get_subcommands().next().is_none() {
            let help = c
                .get_after_help()
                .map(|s| s.to_string())
                .unwrap_or_default();
            assert!(help.contains("raftmq "), "{name} has no example in --help");
        }
        // Hidden commands (the suite's `bench echo` peer) are not for users.
        for s in c
            .get_subcommands()
            .filter(|s| s.get_name() != "help" && !s.is_hide_set())
        {
            walk(s, &name);
        }
    }
    walk(&cmd, "");
}
