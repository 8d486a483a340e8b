//! Making a member the primary (`hscm volume promote`): DRBD's `drbdadm primary`, with
//! its rule that only an up-to-date copy may be promoted and a majority must agree.
//!
//! The steps: nobody else may have the member file open (the server that exported it
//! to the old primary must be stopped, so no write of the old primary's can land
//! after this); every remote member named is claimed with take-over (the old primary
//! finds its claim gone at its next lease check or flush, and turns read-only); the
//! newest header among the members reached must count this copy in sync and show no
//! later promotion; a majority of the set must be reached (unless `force`). Then a
//! lease passes (the old primary's last unchecked writes have landed), and the header
//! goes out with the generation raised, this copy as member 0 and every other member
//! needing a full copy, which the new primary makes in the background once it opens.

use std::io;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::nbd::owner::{Claim, OwnerIo};

#[derive(Debug, Clone, Default)]
pub struct PromoteOptions {
    /// The other members as the new primary reaches them (NBD URIs).
    pub members: Vec<String>,
    /// Promote although a check failed (no majority reached, this copy behind, a
    /// newer generation seen, the file open elsewhere): the operator vouches.
    pub force: bool,
}

#[derive(Debug, Clone)]
pub struct Promoted {
    pub generation: u64,
    /// The member set now, member 0 this copy: (name, what happened to it).
    pub members: Vec<(String, String)>,
    /// The checks `force` overrode.
    pub overridden: Vec<String>,
}

/// The owner record at the end of a local member, so a primary that reached this
/// file through an NBD server finds its claim gone.
struct LocalOwner<'a>(&'a FileBackend);

impl OwnerIo for LocalOwner<'_> {
    fn read_owner(&self, buf: &mut [u8]) -> io::Result<()> {
        let mut b = AlignedBuf::zeroed(OWNER_BLOCK as usize);
        self.0.read_at(self.0.len() - OWNER_BLOCK, &mut b)?;
        buf.copy_from_slice(&b);
        Ok(())
    }
    fn write_owner(&self, bytes: &[u8]) -> io::Result<()> {
        let mut b = AlignedBuf::zeroed(OWNER_BLOCK as usize);
        b.copy_from_slice(bytes);
        self.0.write_through_at(self.0.len() - OWNER_BLOCK, &b)
    }
}

/// Other processes that have `path` open (an NBD server exporting it).
fn other_openers(path: &Path) -> Vec<String> {
    let Ok(target) = std::fs::canonicalize(path) else {
        return Vec::new();
    };
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == target))
        {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            found.push(format!("{} (pid {pid})", comm.trim()));
        }
    }
    found
}

struct Reached {
    uri: NbdUri,
    link: Option<NbdBackend>,
    header: Option<MirrorHeader>,
    why_absent: Option<String>,
}

/// Makes the member at `path` the primary of its mirror: see the module docs.
pub fn promote(path: &Path, opts: &PromoteOptions) -> Result<Promoted, DeviceError> {
    let shown = path.display().to_string();
    let mut overridden = Vec::new();
    let refuse = |why: String, overridden: &mut Vec<String>| {
        if opts.force {
            tracing::warn!("{shown}: promoting although {why} (--force)");
            overridden.push(why);
            Ok(())
        } else {
            Err(DeviceError::Invalid(format!(
                "{shown} was not promoted: {why} (docs/mirror.md; --force promotes anyway)"
            )))
        }
    };
    if opts.members.len() > MAX_REMOTES {
        return Err(DeviceError::Invalid(format!(
            "a mirror has at most {MAX_REMOTES} remote members; {} given",
            opts.members.len()
        )));
    }
    let openers = other_openers(path);
    if !openers.is_empty() {
        refuse(
            format!(
                "it is open in {}: stop the server that exports it first, so the old primary \
                 can write to it no more",
                openers.join(", ")
            ),
            &mut overridden,
        )?;
    }
    let local = FileBackend::open(path, true)?;
    let mine = read_header(&local)
        .map_err(dev_io(format!("cannot read the mirror header of {shown}")))?
        .ok_or_else(|| DeviceError::Invalid(format!("{shown} is not a mirror member")))?;
    let mut reached = Vec::new();
    for name in &opts.members {
        let mut uri = NbdUri::parse(name).map_err(DeviceError::Invalid)?;
        uri.take_over = true;
        match NbdBackend::open(&uri, true) {
            Ok(link) => {
                let header = read_header(&link)
                    .map_err(dev_io(format!("cannot read the first block of {uri}")))?;
                if header.as_ref().is_some_and(|t| t.set_id != mine.set_id) {
                    return Err(DeviceError::Invalid(format!(
                        "{uri} holds a member of another mirror; name only this mirror's members"
                    )));
                }
                if header.is_none() {
                    let mut first = AlignedBuf::zeroed(IO_ALIGN as usize);
                    link.read_at(0, &mut first)
                        .map_err(dev_io(format!("cannot read {uri}")))?;
                    if first.iter().any(|&b| b != 0) {
                        refuse(
                            format!("{uri} holds data that is not this mirror's"),
                            &mut overridden,
                        )?;
                    }
                }
                if link.len() < META_LEN + mine.data_len {
                    return Err(DeviceError::Invalid(format!(
                        "{uri}: the export is too small for this mirror ({} needed)",
                        member_len(mine.data_len)
                    )));
                }
                reached.push(Reached {
                    uri,
                    link: Some(link),
                    header,
                    why_absent: None,
                });
            }
            Err(e) => {
                tracing::warn!("{shown}: member {uri} cannot be reached: {e}");
                reached.push(Reached {
                    uri,
                    link: None,
                    header: None,
                    why_absent: Some(e.to_string()),
                });
            }
        }
    }
    // The newest word on the set among the copies at hand.
    let newest = reached
        .iter()
        .filter_map(|r| r.header.as_ref())
        .chain(std::iter::once(&mine))
        .max_by_key(|h| h.version())
        .cloned()
        .expect("this copy's own header is there");
    if newest.generation > mine.generation && newest.primary_id() != mine.self_id {
        refuse(
            format!(
                "a member was promoted since this copy last heard (generation {}, primary {}); \
                 promoting this one too would split the mirror",
                newest.generation, newest.primary
            ),
            &mut overridden,
        )?;
    }
    match newest.state_of(mine.self_id) {
        Some(MemberState::InSync) => {}
        other => refuse(
            format!(
                "this copy is {} in the newest header (generation {}, epoch {}): it lacks \
                 writes the primary acknowledged",
                other.map_or("not a member", MemberState::name),
                newest.generation,
                newest.epoch
            ),
            &mut overridden,
        )?,
    }
    let of_set = 1 + reached
        .iter()
        .filter(|r| {
            r.header
                .as_ref()
                .is_some_and(|t| newest.state_of(t.self_id).is_some() && t.self_id != mine.self_id)
        })
        .count();
    let majority = newest.members.len() / 2 + 1;
    if of_set < majority {
        refuse(
            format!(
                "{of_set} of the mirror's {} members were reached and {majority} are needed to be \
                 sure no other copy is newer (with two members, the other's death can only be \
                 vouched for by the operator)",
                newest.members.len()
            ),
            &mut overridden,
        )?;
    }
    let owner = LocalOwner(&local);
    let claim = Claim(&owner)
        .claim(&shown, true)
        .map_err(dev_io(format!("cannot claim {shown}")))?;
    // An old primary checks its claims at least once a lease before writing: after two,
    // nothing it sent unchecked is still on its way.
    std::thread::sleep(2 * LEASE + Duration::from_millis(200));
    let mut ids: BTreeSet<u64> = [mine.self_id].into();
    let mut members = vec![Member {
        id: mine.self_id,
        state: MemberState::InSync,
        name: shown.clone(),
    }];
    let mut told = vec![(shown.clone(), "primary".to_string())];
    for r in &reached {
        let known = r
            .header
            .as_ref()
            .map(|t| t.self_id)
            .filter(|id| *id != mine.self_id && !ids.contains(id));
        let id = known.unwrap_or_else(|| loop {
            let id = random_u64() | 1;
            if !ids.contains(&id) {
                break id;
            }
        });
        ids.insert(id);
        let mut name = r.uri.clone();
        name.take_over = false;
        members.push(Member {
            id,
            state: MemberState::NeedsFull,
            name: name.to_string(),
        });
        told.push((
            name.to_string(),
            match &r.why_absent {
                None => "claimed; gets a full copy once the primary opens".into(),
                Some(why) => format!("not reached ({why}); gets a full copy once it answers"),
            },
        ));
    }
    let header = MirrorHeader {
        generation: newest.generation + 1,
        epoch: newest.epoch + 1,
        self_id: mine.self_id,
        clean: true,
        // Its activity log region holds nothing of this copy's: the first open
        // starts one.
        activity_log: false,
        primary: primary_name(),
        members,
        ..mine.clone()
    };
    write_header(&local, &header.encode_for(mine.self_id), true)
        .map_err(dev_io(format!("cannot write the mirror header of {shown}")))?;
    for (i, r) in reached.iter().enumerate() {
        if let Some(link) = &r.link {
            let id = header.members[i + 1].id;
            write_header(link, &header.encode_for(id), true).map_err(dev_io(format!(
                "cannot write the mirror header of {}",
                r.uri
            )))?;
        }
    }
    // Released, so whoever this copy is exported to later can claim it; the token
    // stays another's than the old primary's, so it still finds its claim gone.
    Claim(&owner)
        .release(&claim)
        .map_err(dev_io(format!("cannot release the claim on {shown}")))?;
    Ok(Promoted {
        generation: header.generation,
        members: told,
        overridden,
    })
}
