use raftmq_client::proto::LogId;
use raftmq_client::proto::SendResult;
use raftmq_client::proto::StoredMessage;
use raftmq_client::ClientError;

use super::producer::outcome_of;
use super::readback::tag_of;
use super::readback::tagged_message;
use super::verdict::recovery_times;
use super::verdict::AckTerm;
use super::verdict::Fault;
use super::*;
use crate::check::read::to_checked;
use crate::check::Attempt;
use crate::check::History;
use crate::check::MessageTag;
use crate::check::ReplicaRead;

/// One producer sends `n` messages, all acknowledged at queue 0 offsets 0..n; what a node
/// would return for them, through the same conversions the test uses.
fn run_of(n: u64) -> (History, Vec<StoredMessage>) {
    let mut h = History::default();
    let mut stored = Vec::new();
    for seq in 0..n {
        let tag = MessageTag { producer: 0, seq };
        let result = SendResult {
            msg_id: 100 * seq,
            queue_id: 0,
            queue_offset: seq,
            phys_offset: 100 * seq,
            log_id: Some(LogId {
                term: 1,
                index: seq + 1,
            }),
            duplicate: false,
        };
        h.push(Attempt {
            tag,
            attempt: 1,
            outcome: outcome_of(&Ok(result)),
            started_us: 10 * seq,
            finished_us: 10 * seq + 5,
        });
        let mut m = tagged_message("t", tag, 64);
        m.queue_id = Some(0);
        stored.push(StoredMessage {
            message: Some(m),
            msg_id: 100 * seq,
            queue_id: 0,
            queue_offset: seq,
            phys_offset: 100 * seq,
            ..StoredMessage::default()
        });
    }
    (h, stored)
}

fn replica(node: u64, stored: &[StoredMessage], max: u64) -> ReplicaRead {
    ReplicaRead {
        node,
        ranges: [(0, (0, max))].into_iter().collect(),
        messages: stored.iter().map(|s| to_checked(s, tag_of)).collect(),
    }
}

#[test]
fn healthy_history_passes() {
    let (h, stored) = run_of(20);
    let replicas: Vec<ReplicaRead> = (1..=3).map(|n| replica(n, &stored, 20)).collect();
    let s = summarize("kill-leader", &h, &replicas, &[], &[], &[], true);
    assert!(s.is_pass(), "{}", s.render());
    assert_eq!(s.acknowledged, 20);
    assert!(s.render().ends_with("verdict: PASS"));
}

#[test]
fn deliberately_lost_message_fails() {
    let (h, stored) = run_of(20);
    let mut replicas: Vec<ReplicaRead> = (1..=3).map(|n| replica(n, &stored, 20)).collect();
    // Node 2 lost acknowledged message p0#7 (its later messages survived).
    replicas[1].messages.retain(|m| {
        m.tag
            != Some(MessageTag {
                producer: 0,
                seq: 7,
            })
    });
    let s = summarize("kill-leader", &h, &replicas, &[], &[], &[], true);
    assert!(!s.is_pass());
    assert_eq!(s.verdict, "FAIL");
    assert_eq!(s.lost, 1);
    assert_eq!(s.lost_with_later_read, 1);
    assert!(s.render().contains("LOST on node 2"), "{}", s.render());
    assert!(s.render().ends_with("verdict: FAIL"));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["verdict"], "FAIL");
    assert_eq!(json["lost"], 1);
    assert!(json.get("report_text").is_none());
}

#[test]
fn unknown_outcomes_and_definite_failures_are_kept_apart() {
    let unknown: Result<SendResult, ClientError> = Err(ClientError::UnknownOutcome {
        addr: "a".into(),
        code: tonic::Code::DeadlineExceeded,
        message: "x".into(),
    });
    assert_eq!(outcome_of(&unknown), crate::check::Outcome::Unknown);
    let failed: Result<SendResult, ClientError> = Err(ClientError::Unavailable {
        attempts: 3,
        last: "x".into(),
    });
    assert_eq!(outcome_of(&failed), crate::check::Outcome::Failed);
}

#[test]
fn recovery_is_measured_to_the_first_ack_of_a_later_term() {
    let faults = vec![
        Fault {
            at_us: 1_000_000,
            action: "kill".into(),
            node: 1,
            was_leader: true,
            term: 3,
        },
        Fault {
            at_us: 5_000_000,
            action: "kill".into(),
            node: 2,
            was_leader: false,
            term: 4,
        },
    ];
    let acks = vec![
        AckTerm {
            finished_us: 1_100_000,
            term: 3,
        },
        AckTerm {
            finished_us: 2_500_000,
            term: 4,
        },
        AckTerm {
            finished_us: 3_000_000,
            term: 4,
        },
    ];
    assert_eq!(recovery_times(&faults, &acks), vec![1500]);
    let (h, stored) = run_of(2);
    let s = summarize(
        "kill-leader",
        &h,
        &[replica(1, &stored, 2)],
        &[],
        &faults,
        &acks,
        true,
    );
    assert_eq!(s.faults, 2);
    assert_eq!(s.failovers, 1);
    assert_eq!(s.recovery_ms_p50, Some(1500));
    assert_eq!(s.recovery_ms_max, Some(1500));
}

/// A message retried after an unknown outcome and stored twice: the documented case for
/// at-least-once producers, a failure for exactly-once (idempotent) ones.
#[test]
fn exactly_once_run_fails_on_any_duplicate() {
    let (h, mut stored) = run_of(5);
    let tag = MessageTag {
        producer: 0,
        seq: 2,
    };
    // Message 2's first attempt had an unknown outcome; its retry was acknowledged.
    let mut retried = History::default();
    for a in h.by_tag().into_values().flatten() {
        if a.tag == tag {
            retried.push(Attempt {
                outcome: crate::check::Outcome::Unknown,
                ..a
            });
            retried.push(Attempt { attempt: 2, ..a });
        } else {
            retried.push(a);
        }
    }
    let mut copy = stored[2].clone();
    copy.queue_offset = 5;
    copy.msg_id = 999;
    copy.phys_offset = 999;
    stored.push(copy);
    let replicas: Vec<ReplicaRead> = (1..=3).map(|n| replica(n, &stored, 6)).collect();
    let at_least_once = summarize("kill-leader", &retried, &replicas, &[], &[], &[], false);
    assert!(at_least_once.is_pass(), "{}", at_least_once.render());
    assert_eq!(
        (
            at_least_once.duplicates,
            at_least_once.duplicates_after_retry
        ),
        (1, 1)
    );
    let exactly_once = summarize("kill-leader", &retried, &replicas, &[], &[], &[], true);
    assert!(!exactly_once.is_pass());
    assert!(
        exactly_once
            .render()
            .contains("DUPLICATES OF EXACTLY-ONCE SENDS"),
        "{}",
        exactly_once.render()
    );
    let json = serde_json::to_value(&exactly_once).unwrap();
    assert_eq!(json["duplicates"], 1);
    assert_eq!(json["duplicates_after_retry"], 1);
    assert_eq!(json["exactly_once"], true);
    assert_eq!(json["verdict"], "FAIL");
    // Without the duplicate the exactly-once run passes.
    stored.pop();
    let replicas: Vec<ReplicaRead> = (1..=3).map(|n| replica(n, &stored, 5)).collect();
    let clean = summarize("kill-leader", &retried, &replicas, &[], &[], &[], true);
    assert!(clean.is_pass(), "{}", clean.render());
    assert_eq!(clean.duplicates, 0);
}
