//! Tests of the recovery scan on CommitLog bytes no node would write.

use super::*;
use crate::format::encode_record;
use crate::mem_env::MemEnv;
use crate::segments::segment_name;

const SEG: u64 = 4096;

fn recover_bytes(bytes: &[u8]) -> LogResult<Recovered> {
    let env = Arc::new(MemEnv::new());
    let dir = PathBuf::from("/r/commitlog");
    env.create_dir_all(&dir).expect("mkdir");
    let f = env
        .create_segment(&dir.join(segment_name(0)), SEG)
        .expect("segment");
    f.write_at(0, bytes).expect("write");
    let config = LogConfig {
        segment_bytes: SEG,
        preallocate: false,
        ..LogConfig::default()
    };
    let recycler = Arc::new(Recycler::new(env.clone(), dir.clone(), 0));
    recover(env, dir, &config, Persisted::default(), &[], recycler)
}

#[test]
fn an_entry_after_index_u64_max_ends_the_log_instead_of_overflowing() {
    let mut b = Vec::new();
    encode_record(RecordKind::Blank, 1, u64::MAX, 0, &[], &mut b).expect("encodes");
    let next = b.len() as u64;
    encode_record(RecordKind::Blank, 1, 5, next, &[], &mut b).expect("encodes");
    let r = recover_bytes(&b).expect("a torn tail is truncated");
    assert_eq!(r.locations.len(), 1);
    assert_eq!(r.locations[0].index, u64::MAX);
    assert_eq!(
        r.end, next,
        "the log ends before the entry that does not follow"
    );
}
