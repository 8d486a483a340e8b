//! The file system's decoders behind their checksums: a checkpoint and log records
//! that check out but say anything (what a bug, not damage, would write). Replaying
//! them must answer an error or metadata that encodes to a checkpoint which decodes
//! and encodes to itself; never a panic, a hang or a huge allocation.
//!
//! Input: a u16 length of the checkpoint, the checkpoint, then records each
//! preceded by a u16 length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn take<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (len, tail) = rest.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
    let (piece, tail) = tail.split_at(len);
    *rest = tail;
    Some(piece)
}

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let Some(checkpoint) = take(&mut rest) else {
        return;
    };
    let mut records = Vec::new();
    while let Some(r) = take(&mut rest) {
        records.push(r);
    }
    if let Ok(encoded) = hscm_fs::replay_for_fuzzing(checkpoint, &records) {
        let again = hscm_fs::reencode_for_fuzzing(&encoded)
            .expect("a checkpoint the file system wrote does not decode");
        assert_eq!(again, encoded, "a checkpoint does not encode to itself");
    }
});
