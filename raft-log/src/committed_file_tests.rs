use super::*;

fn id(term: u64, index: u64) -> Option<LogId> {
    Some(LogId::new_term_index(term, index))
}

fn file_bytes(slots: &[(u64, [u8; SLOT_BYTES])]) -> Vec<u8> {
    let mut b = vec![0u8; FILE_BYTES as usize];
    for (s, slot) in slots {
        let at = (*s * SLOT_STRIDE) as usize;
        b[at..at + SLOT_BYTES].copy_from_slice(slot);
    }
    b
}

#[test]
fn a_slot_round_trips_and_an_unwritten_one_is_not_corruption() {
    for v in [None, id(3, 41), id(u64::MAX, u64::MAX)] {
        let slot = encode_slot(7, &v).unwrap();
        assert_eq!(decode_slot(&slot), Ok(Some((7, v))));
    }
    assert_eq!(decode_slot(&[0u8; SLOT_BYTES]), Ok(None));
    let err = decode_slot(&[0u8; 10]).unwrap_err();
    assert!(err.contains("10 bytes"), "{err}");
}

#[test]
fn every_flipped_bit_of_a_written_slot_is_caught() {
    let slot = encode_slot(5, &id(2, 9)).unwrap();
    let len = HEADER_BYTES + usize::from(le_u16(&slot, 6));
    for byte in 0..len {
        for bit in 0..8 {
            let mut s = slot;
            s[byte] ^= 1 << bit;
            assert!(
                decode_slot(&s).is_err(),
                "byte {byte} bit {bit} went unnoticed"
            );
        }
    }
    let mut s = slot;
    s[8..16].copy_from_slice(&0u64.to_le_bytes());
    let crc = slot_crc(&s, len - HEADER_BYTES);
    s[16..20].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_slot(&s), Err("sequence number 0".to_string()));
}

#[test]
fn the_newest_valid_slot_wins_and_a_torn_newest_falls_back_to_the_other() {
    let p = Path::new("meta/committed-id");
    let older = encode_slot(4, &id(1, 10)).unwrap();
    let newer = encode_slot(5, &id(1, 12)).unwrap();
    assert_eq!(
        decode_file(&file_bytes(&[(0, older), (1, newer)]), p).unwrap(),
        (5, id(1, 12))
    );
    assert_eq!(
        decode_file(&file_bytes(&[(0, newer), (1, older)]), p).unwrap(),
        (5, id(1, 12))
    );
    // A crash in the middle of writing slot 1: half of the new bytes, half of the old.
    let mut torn = older;
    torn[..SLOT_BYTES / 2].copy_from_slice(&newer[..SLOT_BYTES / 2]);
    torn[HEADER_BYTES] ^= 0xff;
    assert_eq!(
        decode_file(&file_bytes(&[(0, older), (1, torn)]), p).unwrap(),
        (4, id(1, 10))
    );
}

#[test]
fn a_file_with_no_valid_slot_or_too_short_is_corruption_naming_it() {
    let p = Path::new("meta/committed-id");
    let err = decode_file(&file_bytes(&[]), p).unwrap_err();
    assert!(
        err.to_string().contains("no slot was ever written"),
        "{err}"
    );
    let mut bad = encode_slot(1, &id(1, 1)).unwrap();
    bad[0] ^= 1;
    let err = decode_file(&file_bytes(&[(0, bad)]), p).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("meta/committed-id") && text.contains("slot 0: bad magic"),
        "{text}"
    );
    let err = decode_file(&[0u8; 100], p).unwrap_err();
    assert!(err.to_string().contains("100 bytes"), "{err}");
}

#[test]
fn saves_alternate_slots_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let f = CommittedFile::open(dir.path(), || Ok(id(1, 3))).unwrap();
    assert_eq!(f.get(), id(1, 3), "created with the initial id");
    f.set(&id(1, 4)).unwrap();
    // The first save leaves the slot the file was created with: a torn first save falls back.
    let bytes = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    let at = slot_offset(1) as usize;
    assert_eq!(
        decode_slot(&bytes[at..at + SLOT_BYTES]),
        Ok(Some((1, id(1, 3))))
    );
    f.set(&id(2, 8)).unwrap();
    assert_eq!(f.get(), id(2, 8));
    drop(f);
    let bytes = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    assert_eq!(bytes.len() as u64, FILE_BYTES);
    let slot = |s: u64| decode_slot(&bytes[(s * SLOT_STRIDE) as usize..][..SLOT_BYTES]);
    assert_eq!(slot(0), Ok(Some((2, id(1, 4)))));
    assert_eq!(slot(1), Ok(Some((3, id(2, 8)))));
    // The initial id is asked for only when the file is created.
    let f = CommittedFile::open(dir.path(), || panic!("the file exists")).unwrap();
    assert_eq!(f.get(), id(2, 8));
    f.set(&None).unwrap();
    drop(f);
    let f = CommittedFile::open(dir.path(), || panic!("the file exists")).unwrap();
    assert_eq!(f.get(), None);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [FILE_NAME], "no temporary file left");
}

#[test]
fn a_damaged_file_fails_open_and_keeps_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, [7u8; 64]).unwrap();
    let err = CommittedFile::open(dir.path(), || Ok(None))
        .err()
        .expect("a short file is refused");
    assert!(err.to_string().contains("shorter than"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), [7u8; 64]);
}

#[test]
fn the_fuzz_seed_file_decodes_to_its_newest_slot() {
    let file = crate::fuzzing::committed_id_file(&[(2, id(2, 5)), (3, id(2, 9))]);
    let p = Path::new("committed-id");
    assert_eq!(decode_file(&file, p).unwrap(), (3, id(2, 9)));
    crate::fuzzing::committed_id(&file);
}
