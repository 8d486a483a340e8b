//! One file's contents against a plain byte vector, under random writes, truncates,
//! hole punches and fallocates, with remounts in between: the data path's model test.
//! The file is open, so its bytes are in RAM (its memfd): each step checks what RAM
//! reads and what the target holds, both against the model.

mod common;

use std::sync::Arc;

use common::OWNER;
use hscm_block::MemTarget;
use hscm_fs::{Allocate, FileSystem, Kind, MountOptions, ROOT};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, len: usize, byte: u8 },
    Truncate(u64),
    Punch { offset: u64, len: u64 },
    Extend { offset: u64, len: u64 },
    Remount,
}

fn op() -> impl Strategy<Value = Op> {
    let offset = common::edge_offset();
    prop_oneof![
        5 => (offset.clone(), 1..10_000usize, any::<u8>()).prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
        2 => (0..45_000u64).prop_map(Op::Truncate),
        1 => (offset.clone(), 1..20_000u64).prop_map(|(offset, len)| Op::Punch { offset, len }),
        1 => (offset, 1..20_000u64).prop_map(|(offset, len)| Op::Extend { offset, len }),
        1 => Just(Op::Remount),
    ]
}

fn apply(model: &mut Vec<u8>, op: &Op) {
    match *op {
        Op::Write { offset, len, byte } => {
            let end = offset as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[offset as usize..end].fill(byte);
        }
        Op::Truncate(size) => model.resize(size as usize, 0),
        Op::Punch { offset, len } => {
            let end = ((offset + len) as usize).min(model.len());
            if (offset as usize) < end {
                model[offset as usize..end].fill(0);
            }
        }
        Op::Extend { offset, len } => {
            let end = (offset + len) as usize;
            if model.len() < end {
                model.resize(end, 0);
            }
        }
        Op::Remount => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_file_reads_back_what_a_byte_vector_holds(ops in proptest::collection::vec(op(), 1..60)) {
        let target = Arc::new(MemTarget::new(8 << 20));
        FileSystem::format(target.as_ref(), 0, 0).unwrap();
        let mut fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
        let ino = fs.mknod(ROOT, b"f", Kind::File, 0o644, 0, OWNER).unwrap().ino;
        fs.open(ino).unwrap();
        let mut model = Vec::new();
        for op in &ops {
            match *op {
                Op::Write { offset, len, byte } => {
                    prop_assert_eq!(fs.write(ino, offset, &vec![byte; len]).unwrap() as usize, len);
                }
                Op::Truncate(size) => fs.truncate(ino, size).unwrap(),
                Op::Punch { offset, len } => fs.fallocate(ino, offset, len, Allocate::PunchHole).unwrap(),
                Op::Extend { offset, len } => fs.fallocate(ino, offset, len, Allocate::Extend).unwrap(),
                Op::Remount => {
                    drop(fs);
                    fs = FileSystem::mount(target.clone(), MountOptions::default()).unwrap();
                    fs.open(ino).unwrap();
                }
            }
            apply(&mut model, op);
            let attr = fs.getattr(ino).unwrap();
            prop_assert_eq!(attr.size, model.len() as u64, "size after {:?}", op);
            prop_assert!(fs.file_ram(ino).is_some(), "the open file is in RAM");
            let got = fs.read(ino, 0, model.len() as u32 + 1).unwrap();
            prop_assert!(got == model, "contents (RAM) after {:?}", op);
            let home = fs.read_from_target(ino, 0, model.len() as u32 + 1).unwrap();
            prop_assert!(home == model, "contents (target) after {:?}", op);
        }
    }
}
