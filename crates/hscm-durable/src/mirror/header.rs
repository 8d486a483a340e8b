//! The mirror header: the first 4 KiB of every member, sealed with a CRC-32C. It names
//! the set, the generation (raised by each promotion: fencing), the epoch (raised each
//! time the set of members in sync changes), the primary and every member with its
//! state. Members differ only in `self_id`, which says which member holds the copy.

use crate::codec::{seal_at, sealed, CodecError, Dec, Enc};
pub use crate::members::{MemberState, OnNoQuorum};

/// What the first 8 bytes of a mirror member hold (a volume's own header starts
/// `META_LEN` further in).
pub const MAGIC: &[u8; 8] = b"HSCMMIR1";
pub const HEADER_LEN: usize = 4096;
const VERSION: u32 = 1;
/// The longest member name kept (a URI or a path); longer ones are refused at create.
pub const MAX_NAME: usize = 600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub state: MemberState,
    /// How the primary reaches it: the local path for member 0, else an NBD URI.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorHeader {
    pub set_id: u64,
    pub generation: u64,
    pub epoch: u64,
    /// Which member this copy is (its id in `members`).
    pub self_id: u64,
    /// Bytes the volume sees.
    pub data_len: u64,
    /// Bytes one bit of the write-intent bitmap stands for.
    pub chunk: u64,
    /// Members that must be in sync for a write to be acknowledged; 0: a majority.
    pub quorum: u8,
    pub on_no_quorum: OnNoQuorum,
    /// Whether the primary stopped cleanly (every member flushed, nothing in flight).
    pub clean: bool,
    /// Whether the local member's activity log lists every extent a write may have
    /// been in flight in (the primary's copy only; an hscm before it wrote 0 here, and
    /// a mirror it ran gets a full copy after a crash).
    pub activity_log: bool,
    /// Who the primary is, for messages (host, pid).
    pub primary: String,
    /// Member 0 is the primary's local copy.
    pub members: Vec<Member>,
}

impl MirrorHeader {
    /// Members that must be in sync: the configured quorum, or a majority.
    pub fn needed(&self) -> usize {
        match self.quorum {
            0 => self.members.len() / 2 + 1,
            q => usize::from(q).min(self.members.len()),
        }
    }

    pub fn primary_id(&self) -> u64 {
        self.members.first().map_or(0, |m| m.id)
    }

    /// The state the newest header gives member `id` (None: not a member).
    pub fn state_of(&self, id: u64) -> Option<MemberState> {
        self.members.iter().find(|m| m.id == id).map(|m| m.state)
    }

    /// Orders copies of the set's header: the newer generation, then epoch, wins.
    pub fn version(&self) -> (u64, u64) {
        (self.generation, self.epoch)
    }

    /// The header as member `self_id` keeps it.
    pub fn encode_for(&self, self_id: u64) -> Vec<u8> {
        let mut e = Enc(Vec::with_capacity(HEADER_LEN));
        e.raw(MAGIC)
            .u32(VERSION)
            .u8(self.quorum)
            .u8(match self.on_no_quorum {
                OnNoQuorum::IoError => 0,
                OnNoQuorum::SuspendIo => 1,
            })
            .u8(u8::from(self.clean))
            .u8(u8::from(self.activity_log))
            .u64(self.set_id)
            .u64(self.generation)
            .u64(self.epoch)
            .u64(self_id)
            .u64(self.data_len)
            .u64(self.chunk)
            .bytes(&self.primary.as_bytes()[..self.primary.len().min(MAX_NAME)])
            .u8(self.members.len() as u8);
        for m in &self.members {
            e.u64(m.id)
                .u8(m.state.code())
                .bytes(&m.name.as_bytes()[..m.name.len().min(MAX_NAME)]);
        }
        let mut b = e.0;
        assert!(
            b.len() <= HEADER_LEN - 4,
            "a mirror header of {} members outgrew its block",
            self.members.len()
        );
        b.resize(HEADER_LEN, 0);
        seal_at(&mut b, HEADER_LEN - 4);
        b
    }

    /// None when `b` is not a mirror header at all; an error when it is one but
    /// damaged or of another version.
    pub fn decode(b: &[u8]) -> Result<Option<MirrorHeader>, CodecError> {
        if b.len() < HEADER_LEN || &b[..8] != MAGIC {
            return Ok(None);
        }
        let b = &b[..HEADER_LEN];
        if !sealed(b, HEADER_LEN - 4) {
            return Err(CodecError(
                "the mirror header's checksum does not match: it is damaged".into(),
            ));
        }
        let mut d = Dec::new(&b[8..], "the mirror header");
        let version = d.u32()?;
        if version != VERSION {
            return Err(d.bad(format!(
                "version {version}; this hscm reads version {VERSION}"
            )));
        }
        let quorum = d.u8()?;
        let on_no_quorum = match d.u8()? {
            0 => OnNoQuorum::IoError,
            1 => OnNoQuorum::SuspendIo,
            other => return Err(d.bad(format!("on-no-quorum code {other}"))),
        };
        let clean = d.u8()? != 0;
        let activity_log = d.u8()? & 1 != 0;
        let (set_id, generation, epoch, self_id, data_len, chunk) =
            (d.u64()?, d.u64()?, d.u64()?, d.u64()?, d.u64()?, d.u64()?);
        let primary = String::from_utf8_lossy(&d.bytes()?).into_owned();
        let count = d.u8()?;
        let mut members = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let id = d.u64()?;
            let code = d.u8()?;
            let state = MemberState::from_code(code)
                .ok_or_else(|| d.bad(format!("member state code {code}")))?;
            let name = String::from_utf8_lossy(&d.bytes()?).into_owned();
            members.push(Member { id, state, name });
        }
        if members.is_empty() || !chunk.is_power_of_two() {
            return Err(d.bad("no members, or a bitmap chunk that is not a power of two"));
        }
        Ok(Some(MirrorHeader {
            set_id,
            generation,
            epoch,
            self_id,
            data_len,
            chunk,
            quorum,
            on_no_quorum,
            clean,
            activity_log,
            primary,
            members,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MirrorHeader {
        MirrorHeader {
            set_id: 7,
            generation: 3,
            epoch: 9,
            self_id: 11,
            data_len: 64 << 20,
            chunk: 64 << 10,
            quorum: 0,
            on_no_quorum: OnNoQuorum::SuspendIo,
            clean: true,
            activity_log: true,
            primary: "host-a (pid 1)".into(),
            members: vec![
                Member {
                    id: 11,
                    state: MemberState::InSync,
                    name: "/srv/a.hscm".into(),
                },
                Member {
                    id: 12,
                    state: MemberState::Behind,
                    name: "nbd://b/".into(),
                },
            ],
        }
    }

    #[test]
    fn a_header_round_trips_per_member_and_damage_is_an_error() {
        let h = sample();
        let b = h.encode_for(12);
        let back = MirrorHeader::decode(&b).unwrap().unwrap();
        assert_eq!(back.self_id, 12);
        assert_eq!(
            MirrorHeader {
                self_id: 11,
                ..back
            },
            h
        );
        let mut torn = b.clone();
        torn[41] ^= 1;
        assert!(MirrorHeader::decode(&torn).is_err());
        assert!(MirrorHeader::decode(&[0u8; HEADER_LEN]).unwrap().is_none());
        // The layout, byte by byte where it is fixed (docs/mirror.md).
        assert_eq!(&b[..8], b"HSCMMIR1");
        assert_eq!(b[8..12], 1u32.to_le_bytes());
        assert_eq!(
            (b[12], b[13], b[14], b[15]),
            (0, 1, 1, 1),
            "quorum, on-no-quorum, clean, activity log"
        );
        assert_eq!(b[16..24], 7u64.to_le_bytes(), "set id");
        assert_eq!(b[24..32], 3u64.to_le_bytes(), "generation");
        assert_eq!(b[32..40], 9u64.to_le_bytes(), "epoch");
        assert_eq!(b[40..48], 12u64.to_le_bytes(), "this member");
        assert_eq!(h.needed(), 2);
        assert_eq!(MirrorHeader { quorum: 1, ..h }.needed(), 1);
    }
}
