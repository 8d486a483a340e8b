//! Making a mirror and opening one as its primary: every remote member reached and
//! checked (the same set, the same member, no newer generation), its state after an
//! unclean stop, its bitmap loaded.

use super::*;

/// Creates a mirror at `path` (the local member) with `remotes` as its other members,
/// every member empty and in sync, sized for `data_len` bytes of volume.
pub fn create(
    path: &Path,
    data_len: u64,
    remotes: &[String],
    opts: &MirrorOptions,
) -> Result<MirrorBackend, DeviceError> {
    if remotes.is_empty() || remotes.len() > MAX_REMOTES {
        return Err(DeviceError::Invalid(format!(
            "a mirror has one to {MAX_REMOTES} remote members; {} given",
            remotes.len()
        )));
    }
    let members = 1 + remotes.len();
    if usize::from(opts.quorum) > members {
        return Err(DeviceError::Invalid(format!(
            "a quorum of {} is more than the mirror's {members} members",
            opts.quorum
        )));
    }
    let data_len = data_len.div_ceil(IO_ALIGN) * IO_ALIGN;
    let name = path.display().to_string();
    if name.len() > MAX_NAME || remotes.iter().any(|r| r.len() > MAX_NAME) {
        return Err(DeviceError::Invalid(format!(
            "a member's name is longer than {MAX_NAME} bytes"
        )));
    }
    // Every remote is checked before the local file is made, so a bad one leaves
    // nothing behind.
    let mut links = Vec::new();
    for r in remotes {
        let uri = NbdUri::parse(r).map_err(DeviceError::Invalid)?;
        let link = NbdBackend::open(&uri, true)?;
        let need = META_LEN + data_len;
        if link.len() < need {
            return Err(DeviceError::Invalid(format!(
                "{uri}: the export holds {} bytes; a member of this mirror needs at least {} \
                 (its data, {} of mirror metadata and the 4 KiB owner record)",
                link.len() + OWNER_BLOCK,
                member_len(data_len),
                META_LEN
            )));
        }
        if !opts.overwrite {
            let mut first = AlignedBuf::zeroed(IO_ALIGN as usize);
            link.read_at(0, &mut first)
                .map_err(dev_io(format!("cannot read the first block of {uri}")))?;
            if first.iter().any(|&b| b != 0) {
                return Err(DeviceError::AlreadyExists {
                    path: uri.to_string(),
                    kind: "an NBD export whose first block holds data",
                });
            }
        }
        // Zeroed, so every member holds the same bytes from the start.
        link.write_zeroes_at(0, META_LEN + data_len)
            .map_err(dev_io(format!("cannot zero {uri}")))?;
        links.push((uri, link));
    }
    let local = FileBackend::create(path, member_len(data_len), opts.overwrite)?;
    let mut ids = BTreeSet::new();
    while ids.len() < members {
        ids.insert(random_u64() | 1);
    }
    let ids: Vec<u64> = ids.into_iter().collect();
    let mut member_list = vec![Member {
        id: ids[0],
        state: MemberState::InSync,
        name,
    }];
    for (i, (uri, _)) in links.iter().enumerate() {
        member_list.push(Member {
            id: ids[i + 1],
            state: MemberState::InSync,
            name: uri.to_string(),
        });
    }
    let header = MirrorHeader {
        set_id: random_u64(),
        generation: 1,
        epoch: 1,
        self_id: ids[0],
        data_len,
        chunk: chunk_for(data_len),
        quorum: opts.quorum,
        on_no_quorum: opts.on_no_quorum,
        clean: false,
        activity_log: true,
        primary: primary_name(),
        members: member_list,
    };
    // The activity log before the header that says it is kept.
    let activity = ActivityLog::new(activity::EXTENT, activity::SLOTS, 0);
    let first = activity.first_record();
    local
        .write_through_at(activity::slot_of(ACTIVITY_AT, first.seq), &first.encode())
        .map_err(dev_io(format!(
            "cannot write the activity log of {}",
            path.display()
        )))?;
    write_header(&local, &header.encode_for(ids[0]), true).map_err(dev_io(format!(
        "cannot write the mirror header of {}",
        path.display()
    )))?;
    for (i, (uri, link)) in links.iter().enumerate() {
        write_header(link, &header.encode_for(ids[i + 1]), true)
            .map_err(dev_io(format!("cannot write the mirror header of {uri}")))?;
    }
    let remotes = links
        .into_iter()
        .enumerate()
        .map(|(i, (uri, link))| Remote::new(i + 1, uri, Some(link), MemberState::InSync, &header))
        .collect();
    Ok(MirrorBackend::start(
        path, local, header, remotes, true, activity,
    ))
}

impl MirrorBackend {
    /// Opens the mirror whose local member is at `path`: writable, as its primary
    /// (connecting every remote member, refusing if another primary was promoted), or
    /// read-only, the local member alone.
    pub fn open(path: &Path, writable: bool) -> Result<MirrorBackend, DeviceError> {
        let local = FileBackend::open(path, writable)?;
        Self::open_local(path, local, writable)
    }

    /// The local member alone, read-only, without a lock: for reading headers while
    /// the primary runs.
    pub fn open_for_inspection(path: &Path) -> Result<MirrorBackend, DeviceError> {
        let local = FileBackend::open_for_inspection(path)?;
        Self::open_local(path, local, false)
    }

    /// The header the local member at `path` holds.
    pub fn header_at(path: &Path) -> Result<MirrorHeader, DeviceError> {
        let local = FileBackend::open_for_inspection(path)?;
        let h = read_header(&local).map_err(dev_io(format!("cannot read {}", path.display())))?;
        h.ok_or_else(|| DeviceError::Invalid(format!("{} is not a mirror member", path.display())))
    }

    fn open_local(
        path: &Path,
        local: FileBackend,
        writable: bool,
    ) -> Result<MirrorBackend, DeviceError> {
        let shown = path.display().to_string();
        let mut h = read_header(&local)
            .map_err(dev_io(format!("cannot read the mirror header of {shown}")))?
            .ok_or_else(|| DeviceError::Invalid(format!("{shown} is not a mirror member")))?;
        if local.len() < META_LEN + h.data_len {
            return Err(DeviceError::Invalid(format!(
                "{shown} holds {} bytes; its mirror header asks for {}",
                local.len(),
                member_len(h.data_len)
            )));
        }
        if !writable {
            let idle = ActivityLog::new(activity::EXTENT, activity::SLOTS, 0);
            return Ok(Self::start(path, local, h, Vec::new(), false, idle));
        }
        if h.self_id != h.primary_id() {
            let state = h
                .state_of(h.self_id)
                .map_or("not listed", MemberState::name);
            return Err(DeviceError::Invalid(format!(
                "{shown} is a replica in a mirror whose primary is {} ({}; this copy is {state}): \
                 export it over NBD to its primary, or make it the primary with \
                 `hscm volume promote {shown}` (docs/mirror.md)",
                h.members[0].name, h.primary
            )));
        }
        // After a crash, the extents the activity log lists are what may differ
        // between the members (None: everything may).
        // A log the header does not vouch for (a promoted replica's old one, or none
        // at all) only gives the sequence number to go on after.
        let log = Record::read(&local, ACTIVITY_AT)
            .map_err(dev_io(format!("cannot read the activity log of {shown}")))?;
        let recovered = log
            .as_ref()
            .filter(|r| h.activity_log && !h.clean && !r.everything);
        let mut remotes = Vec::new();
        for slot in 1..h.members.len() {
            let m = h.members[slot].clone();
            let uri = NbdUri::parse(&m.name).map_err(DeviceError::Invalid)?;
            let (link, mut state) = match NbdBackend::open(&uri, true) {
                Ok(link) => {
                    check_member(&link, &h, &m)?;
                    (Some(link), m.state)
                }
                // Claimed by another opener: a primary promoted elsewhere holds it.
                Err(DeviceError::Invalid(why)) => {
                    return Err(DeviceError::Invalid(format!(
                        "{shown}: its member {uri} refuses this primary: {why}; if a replica \
                         was promoted, this copy is stale (docs/mirror.md)"
                    )))
                }
                Err(e) => {
                    tracing::warn!("{shown}: member {uri} is absent ({e}); running without it");
                    let s = if m.state == MemberState::InSync {
                        MemberState::Behind
                    } else {
                        m.state
                    };
                    (None, s)
                }
            };
            if !h.clean && recovered.is_none() {
                // Writes in flight when the primary stopped may have reached one copy
                // and not the other, anywhere: only a full copy makes them equal again.
                state = MemberState::NeedsFull;
            } else if !h.clean && state == MemberState::InSync {
                state = MemberState::Behind;
            }
            let remote = Remote::new(slot, uri, link, state, &h);
            if state == MemberState::Behind {
                load_bitmap(&local, &remote)
                    .map_err(dev_io(format!("cannot read the bitmaps of {shown}")))?;
                if let Some(r) = recovered {
                    let mut bits = remote.bits.lock();
                    r.chunks(h.chunk, h.data_len).for_each(|c| bits.mark(c));
                }
            }
            remotes.push(remote);
        }
        h.clean = false;
        h.primary = primary_name();
        // The log goes on with the extent and size it had (a test may have made them
        // small), after the sequence number its newest slot holds.
        let activity = match &log {
            Some(r) => ActivityLog::new(r.extent, usize::from(r.slots), r.seq),
            None => ActivityLog::new(activity::EXTENT, activity::SLOTS, 0),
        };
        let mirror = Self::start(path, local, h, remotes, true, activity);
        mirror
            .inner
            .start_activity_log()
            .map_err(dev_io(format!("cannot start the activity log of {shown}")))?;
        mirror
            .inner
            .commit_header()
            .map_err(dev_io(format!("cannot write the mirror header of {shown}")))?;
        Ok(mirror)
    }
}

/// A remote member's header must name the same set and the same member, at a
/// generation no newer than the primary's (newer: a replica was promoted).
pub(super) fn check_member(
    link: &NbdBackend,
    h: &MirrorHeader,
    m: &Member,
) -> Result<(), DeviceError> {
    let uri = link.uri().to_string();
    let theirs = read_header(link).map_err(dev_io(format!("cannot read the header of {uri}")))?;
    match theirs {
        None if m.state == MemberState::NeedsFull => Ok(()),
        None => Err(DeviceError::Invalid(format!(
            "{uri} holds no mirror header, yet this mirror counts it as {}: is it the right export?",
            m.state.name()
        ))),
        Some(t) if t.set_id != h.set_id || t.self_id != m.id => Err(DeviceError::Invalid(format!(
            "{uri} holds another mirror's member (or another member of this one): is it the right export?"
        ))),
        Some(t) if t.generation > h.generation => Err(DeviceError::Invalid(format!(
            "{uri} is at generation {} and this copy at {}: {} was promoted since; this copy \
             is stale and may not write (rejoin it as a replica: docs/mirror.md)",
            t.generation, h.generation, t.primary
        ))),
        Some(_) => Ok(()),
    }
}

/// Reads a behind member's persisted bitmap into its bits (every set bit to copy).
pub(super) fn load_bitmap(local: &FileBackend, r: &Remote) -> io::Result<()> {
    let mut bits = r.bits.lock();
    let words = bits.persisted.len();
    let bytes = (words * 8).div_ceil(IO_ALIGN as usize) * IO_ALIGN as usize;
    let mut buf = AlignedBuf::zeroed(bytes);
    local.read_at(r.bitmap_offset(), &mut buf)?;
    bits.load(&buf);
    Ok(())
}
