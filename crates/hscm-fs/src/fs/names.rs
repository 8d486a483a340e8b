//! The namespace and attributes: lookups, creating and removing names, rename,
//! setattr and extended attributes. Each operation checks everything first, then
//! lists its edits; `FileSystem::mutate` applies and logs them as one record.

use super::*;

/// A directory's links: its entry in the parent, its own ".", and one ".." per subdirectory.
const MAX_LINKS: u32 = 65_000;

/// Names and values of one inode's extended attributes, together (ext4 holds one
/// block's worth without its ea_inode feature; a value alone may be 64 KiB, as the
/// kernel's XATTR_SIZE_MAX).
pub const XATTR_BYTES_PER_INODE: usize = 64 << 10;

/// Who creates a node, and with what mode.
#[derive(Debug, Clone, Copy)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl FileSystem {
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        let st = self.state.read();
        let dir = st.meta.get(parent)?;
        expect_kind(dir, Kind::Dir)?;
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong(name.len()));
        }
        let ino = *dir
            .entries()
            .and_then(|e| e.get(name))
            .ok_or(Error::NotFound)?;
        let a = Self::attr_of(st.meta.get(ino)?);
        drop(st);
        Ok(self.live_attr(a))
    }

    /// Every entry of a directory (without "." and ".."): name, inode, kind.
    pub fn readdir(&self, ino: u64) -> Result<Vec<(Vec<u8>, u64, Kind)>> {
        let st = self.state.read();
        let dir = st.meta.get(ino)?;
        expect_kind(dir, Kind::Dir)?;
        let entries = dir.entries().expect("a directory has entries");
        entries
            .iter()
            .map(|(name, &child)| Ok((name.clone(), child, st.meta.get(child)?.attr.kind)))
            .collect()
    }

    /// Up to `max` entries of a directory in name order, those after `after` (from
    /// the first with None): a listing read a page at a time from the live
    /// directory, so that an open directory costs its reader no copy of it. An
    /// entry present for the whole listing is listed once; one added or removed
    /// meanwhile may or may not be, as POSIX allows.
    pub fn readdir_page(
        &self,
        ino: u64,
        after: Option<&[u8]>,
        max: usize,
    ) -> Result<Vec<(Vec<u8>, u64, Kind)>> {
        use std::ops::Bound;
        let st = self.state.read();
        let dir = st.meta.get(ino)?;
        expect_kind(dir, Kind::Dir)?;
        let entries = dir.entries().expect("a directory has entries");
        let from = match after {
            Some(name) => Bound::Excluded(name),
            None => Bound::Unbounded,
        };
        entries
            .range::<[u8], _>((from, Bound::Unbounded))
            .take(max)
            .map(|(name, &child)| Ok((name.clone(), child, st.meta.get(child)?.attr.kind)))
            .collect()
    }

    /// The parent of a directory (the root is its own).
    pub fn parent_of(&self, dir: u64) -> Result<u64> {
        match &self.state.read().meta.get(dir)?.body {
            Body::Dir { parent, .. } => Ok(*parent),
            _ => Err(Error::NotDir),
        }
    }

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        match &self.state.read().meta.get(ino)?.body {
            Body::Symlink(target) => Ok(target.clone()),
            _ => Err(Error::Invalid("not a symbolic link".into())),
        }
    }

    /// Creates a file, FIFO, socket or device node (`mode` holds the permission bits).
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
        rdev: u32,
        owner: Owner,
    ) -> Result<Attr> {
        if kind == Kind::Dir || kind == Kind::Symlink {
            return Err(Error::Invalid(
                "mknod makes no directories or symlinks".into(),
            ));
        }
        self.create_node(parent, name, kind, mode, rdev, owner, Vec::new())
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32, owner: Owner) -> Result<Attr> {
        self.create_node(parent, name, Kind::Dir, mode, 0, owner, Vec::new())
    }

    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8], owner: Owner) -> Result<Attr> {
        if target.is_empty() || target.len() > 4095 {
            return Err(Error::Invalid("a symlink target of 1-4095 bytes".into()));
        }
        self.create_node(
            parent,
            name,
            Kind::Symlink,
            0o777,
            0,
            owner,
            target.to_vec(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn create_node(
        &self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
        rdev: u32,
        owner: Owner,
        target: Vec<u8>,
    ) -> Result<Attr> {
        check_name(name)?;
        self.mutate(|st, edits| {
            let dir = st.meta.get(parent)?;
            expect_kind(dir, Kind::Dir)?;
            if dir.entries().expect("dir").contains_key(name) {
                return Err(Error::Exists);
            }
            if kind == Kind::Dir && dir.attr.nlink >= MAX_LINKS {
                return Err(Error::TooManyLinks);
            }
            let now = Time::now();
            let attr = Attr {
                ino: st.meta.next_ino,
                kind,
                perm: (mode & 0o7777) as u16,
                nlink: if kind == Kind::Dir { 2 } else { 1 },
                uid: owner.uid,
                gid: owner.gid,
                rdev,
                size: target.len() as u64,
                allocated: 0,
                atime: now,
                mtime: now,
                ctime: now,
                crtime: now,
            };
            let mut p = dir.attr;
            p.mtime = now;
            p.ctime = now;
            if kind == Kind::Dir {
                p.nlink += 1;
            }
            edits.push(Edit::Create {
                attr,
                parent,
                target,
            });
            edits.push(Edit::Link {
                dir: parent,
                name: name.to_vec(),
                ino: attr.ino,
            });
            edits.push(Edit::SetAttr(p));
            let (body, xattrs) = (Body::Special, Default::default());
            let mut shown = Self::attr_of(&Inode { attr, body, xattrs });
            if kind == Kind::Dir {
                // What getattr will say of it: a directory is one block.
                shown.size = BLOCK;
                shown.allocated = BLOCK;
            }
            Ok(shown)
        })
    }

    /// A new name for a file (not a directory).
    pub fn link(&self, ino: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        check_name(name)?;
        self.mutate(|st, edits| {
            let inode = st.meta.get(ino)?;
            if inode.attr.kind == Kind::Dir {
                return Err(Error::Unsupported("hard links to directories"));
            }
            if inode.attr.nlink >= MAX_LINKS {
                return Err(Error::TooManyLinks);
            }
            let dir = st.meta.get(parent)?;
            expect_kind(dir, Kind::Dir)?;
            if dir.entries().expect("dir").contains_key(name) {
                return Err(Error::Exists);
            }
            let now = Time::now();
            let mut a = inode.attr;
            a.nlink += 1;
            a.ctime = now;
            let mut p = dir.attr;
            p.mtime = now;
            p.ctime = now;
            edits.push(Edit::Link {
                dir: parent,
                name: name.to_vec(),
                ino,
            });
            edits.push(Edit::SetAttr(a));
            edits.push(Edit::SetAttr(p));
            Ok(Self::attr_of(&Inode {
                attr: a,
                ..inode.clone()
            }))
        })
        .map(|a| self.live_attr(a))
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove(parent, name, false)
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove(parent, name, true)
    }

    fn remove(&self, parent: u64, name: &[u8], dir_wanted: bool) -> Result<()> {
        self.mutate(|st, edits| {
            let dir = st.meta.get(parent)?;
            expect_kind(dir, Kind::Dir)?;
            let ino = *dir
                .entries()
                .expect("dir")
                .get(name)
                .ok_or(Error::NotFound)?;
            let inode = st.meta.get(ino)?;
            let is_dir = inode.attr.kind == Kind::Dir;
            match (dir_wanted, is_dir) {
                (true, false) => return Err(Error::NotDir),
                (false, true) => return Err(Error::IsDir),
                _ => {}
            }
            if is_dir && !inode.entries().expect("dir").is_empty() {
                return Err(Error::NotEmpty);
            }
            let now = Time::now();
            let mut p = dir.attr;
            p.mtime = now;
            p.ctime = now;
            edits.push(Edit::Unlink {
                dir: parent,
                name: name.to_vec(),
            });
            unlink_edits(st, edits, ino, &mut p, now)?;
            edits.push(Edit::SetAttr(p));
            Ok(())
        })
    }

    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        check_name(new_name)?;
        if flags.exchange && flags.no_replace {
            return Err(Error::Invalid(
                "RENAME_EXCHANGE with RENAME_NOREPLACE".into(),
            ));
        }
        self.mutate(|st, edits| {
            let m = &st.meta;
            let from_dir = m.get(parent)?;
            expect_kind(from_dir, Kind::Dir)?;
            expect_kind(m.get(new_parent)?, Kind::Dir)?;
            let ino = *from_dir
                .entries()
                .expect("dir")
                .get(name)
                .ok_or(Error::NotFound)?;
            let existing = m
                .get(new_parent)?
                .entries()
                .expect("dir")
                .get(new_name)
                .copied();
            if existing == Some(ino) {
                // Two names of one file: POSIX says do nothing.
                return Ok(());
            }
            let moving = m.get(ino)?.attr;
            // A directory may not move under itself (EINVAL), nor replace one of the
            // source's ancestors, which holds the source (ENOTEMPTY, as Linux says).
            if moving.kind == Kind::Dir && is_within(m, new_parent, ino)? {
                return Err(Error::Invalid(
                    "a directory cannot move under itself".into(),
                ));
            }
            if let Some(victim) = existing {
                if m.get(victim)?.attr.kind == Kind::Dir && is_within(m, parent, victim)? {
                    return Err(if flags.exchange {
                        Error::Invalid("a directory cannot move under itself".into())
                    } else {
                        Error::NotEmpty
                    });
                }
            }
            let now = Time::now();
            // Parents' attributes, edited in one place when both are the same dir.
            let mut parents: Vec<Attr> = vec![m.get(parent)?.attr];
            if new_parent != parent {
                parents.push(m.get(new_parent)?.attr);
            }
            let idx = |d: u64| usize::from(d != parent);
            if flags.exchange {
                let other = existing.ok_or(Error::NotFound)?;
                let other_attr = m.get(other)?.attr;
                edits.push(Edit::Link {
                    dir: parent,
                    name: name.to_vec(),
                    ino: other,
                });
                edits.push(Edit::Link {
                    dir: new_parent,
                    name: new_name.to_vec(),
                    ino,
                });
                for (who, kind, from, to) in [
                    (ino, moving.kind, parent, new_parent),
                    (other, other_attr.kind, new_parent, parent),
                ] {
                    if kind == Kind::Dir && from != to {
                        edits.push(Edit::Reparent {
                            dir: who,
                            parent: to,
                        });
                        parents[idx(from)].nlink -= 1;
                        parents[idx(to)].nlink += 1;
                    }
                }
                for mut a in [moving, other_attr] {
                    a.ctime = now;
                    edits.push(Edit::SetAttr(a));
                }
            } else {
                if let Some(victim) = existing {
                    if flags.no_replace {
                        return Err(Error::Exists);
                    }
                    let v = m.get(victim)?;
                    match (moving.kind == Kind::Dir, v.attr.kind == Kind::Dir) {
                        (true, false) => return Err(Error::NotDir),
                        (false, true) => return Err(Error::IsDir),
                        (true, true) if !v.entries().expect("dir").is_empty() => {
                            return Err(Error::NotEmpty)
                        }
                        _ => {}
                    }
                    edits.push(Edit::Unlink {
                        dir: new_parent,
                        name: new_name.to_vec(),
                    });
                    let i = idx(new_parent);
                    unlink_edits(st, edits, victim, &mut parents[i], now)?;
                }
                edits.push(Edit::Unlink {
                    dir: parent,
                    name: name.to_vec(),
                });
                edits.push(Edit::Link {
                    dir: new_parent,
                    name: new_name.to_vec(),
                    ino,
                });
                if moving.kind == Kind::Dir && parent != new_parent {
                    edits.push(Edit::Reparent {
                        dir: ino,
                        parent: new_parent,
                    });
                    parents[0].nlink -= 1;
                    parents[1].nlink += 1;
                }
                let mut a = moving;
                a.ctime = now;
                edits.push(Edit::SetAttr(a));
            }
            // A directory moved in adds a ".." link to its new parent.
            if parents.iter().any(|p| p.nlink > MAX_LINKS) {
                return Err(Error::TooManyLinks);
            }
            for mut p in parents {
                p.mtime = now;
                p.ctime = now;
                edits.push(Edit::SetAttr(p));
            }
            Ok(())
        })
    }

    /// Changes attributes; a size change truncates or extends (with holes).
    pub fn setattr(&self, ino: u64, set: SetAttr) -> Result<Attr> {
        if let Some(size) = set.size {
            self.truncate(ino, size)?;
        }
        let ram = self.ram.get(ino).filter(|f| f.kernel_may_write());
        // Ordered with write-backs of the file, which take the memfd's mtime.
        let _changes = ram.as_ref().map(|f| f.changes.lock());
        let attr = self.mutate(|st, edits| {
            let inode = st.meta.get(ino)?;
            let mut a = inode.attr;
            let now = Time::now();
            if let Some(mode) = set.mode {
                a.perm = (mode & 0o7777) as u16;
            }
            // Against the file's group before a chown changes it, as Linux decides.
            if a.kind != Kind::Dir {
                a.perm = set.drop_setid.apply(a.perm, a.gid);
            }
            if let Some(uid) = set.uid {
                a.uid = uid;
            }
            if let Some(gid) = set.gid {
                a.gid = gid;
            }
            if let Some(t) = set.atime {
                a.atime = t;
            }
            if let Some(t) = set.mtime {
                a.mtime = t;
            }
            a.ctime = now;
            edits.push(Edit::SetAttr(a));
            Ok(Self::attr_of(&Inode {
                attr: a,
                ..inode.clone()
            }))
        })?;
        if let Some(f) = &ram {
            // While the kernel may write the file, its RAM holds the size and mtime
            // `stat` shows (see `live_attr`): the times set go there too.
            if set.atime.is_some() || set.mtime.is_some() {
                f.set_times(set.atime, set.mtime).map_err(|e| {
                    Error::Failed(format!("setting file {ino}'s times in RAM: {e}"))
                })?;
            }
        }
        // What the kernel caches from this answer: the size its writes into RAM
        // gave the file, not the one the file system has written home so far.
        Ok(self.live_attr(attr))
    }

    /// `create_only`: fail if it exists (XATTR_CREATE); `replace_only`: fail if not.
    pub fn setxattr(
        &self,
        ino: u64,
        name: &[u8],
        value: &[u8],
        create_only: bool,
        replace_only: bool,
    ) -> Result<()> {
        if name.is_empty() || name.len() > 255 || value.len() > 64 << 10 {
            return Err(Error::Invalid(
                "xattr names 1-255 bytes, values up to 64 KiB".into(),
            ));
        }
        if name.starts_with(b"system.posix_acl_") {
            // No ACLs: refused, so that cp -a, rsync -A and tar --acls fall back to
            // chmod rather than believe an ACL that does not set the mode.
            return Err(Error::Unsupported("POSIX ACLs"));
        }
        self.mutate(|st, edits| {
            let inode = st.meta.get(ino)?;
            let exists = inode.xattrs.contains_key(name);
            if create_only && exists {
                return Err(Error::Exists);
            }
            if replace_only && !exists {
                return Err(Error::NoAttribute);
            }
            let others: usize = inode
                .xattrs
                .iter()
                .filter(|(k, _)| k.as_slice() != name)
                .map(|(k, v)| k.len() + v.len())
                .sum();
            if others + name.len() + value.len() > XATTR_BYTES_PER_INODE {
                return Err(Error::NoSpace(format!(
                    "extended attributes of one inode hold at most {XATTR_BYTES_PER_INODE} bytes of names and values"
                )));
            }
            let mut a = inode.attr;
            a.ctime = Time::now();
            edits.push(Edit::SetXattr {
                ino,
                name: name.to_vec(),
                value: value.to_vec(),
            });
            edits.push(Edit::SetAttr(a));
            Ok(())
        })
    }

    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        let st = self.state.read();
        st.meta
            .get(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or(Error::NoAttribute)
    }

    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        Ok(self
            .state
            .read()
            .meta
            .get(ino)?
            .xattrs
            .keys()
            .cloned()
            .collect())
    }

    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.mutate(|st, edits| {
            let inode = st.meta.get(ino)?;
            if !inode.xattrs.contains_key(name) {
                return Err(Error::NoAttribute);
            }
            let mut a = inode.attr;
            a.ctime = Time::now();
            edits.push(Edit::RemoveXattr {
                ino,
                name: name.to_vec(),
            });
            edits.push(Edit::SetAttr(a));
            Ok(())
        })
    }
}

/// The edits that take one link away from `ino` (its name is already unlinked): a
/// directory goes at once (and its parent, whose attributes are `parent`, loses the
/// ".." link); a file goes when its last link and last open handle are gone.
fn unlink_edits(
    st: &State,
    edits: &mut Vec<Edit>,
    ino: u64,
    parent: &mut Attr,
    now: Time,
) -> Result<()> {
    let mut a = st.meta.get(ino)?.attr;
    if a.kind == Kind::Dir {
        parent.nlink -= 1;
        edits.push(Edit::Drop { ino });
        return Ok(());
    }
    a.nlink -= 1;
    a.ctime = now;
    if a.nlink == 0 && !st.open.contains_key(&ino) {
        edits.push(Edit::Drop { ino });
    } else {
        edits.push(Edit::SetAttr(a));
    }
    Ok(())
}

/// `dir` is `ancestor` or lies under it.
fn is_within(m: &Meta, mut dir: u64, ancestor: u64) -> Result<bool> {
    loop {
        if dir == ancestor {
            return Ok(true);
        }
        match &m.get(dir)?.body {
            Body::Dir { parent, .. } if *parent != dir => dir = *parent,
            _ => return Ok(false),
        }
    }
}
