//! setuid, setgid and file capabilities: which writes and changes must drop them,
//! and dropping them after writes the daemon never saw.

use fuser::{INodeNo, Request};
use hscm_fs::DropSetid;

use crate::{Fuse, CAPABILITY_XATTR};

impl Fuse {
    /// A write to the file must drop setuid, setgid or a file capability: the
    /// kernel does that only on writes the file system sees, so such a file's
    /// writes never go to RAM behind its back.
    pub(crate) fn write_must_drop_privileges(&self, ino: u64) -> bool {
        let setid = self
            .fs
            .getattr(ino)
            .map(|a| a.perm & 0o6000 != 0)
            .unwrap_or(true);
        setid || self.fs.getxattr(ino, CAPABILITY_XATTR).is_ok()
    }

    /// What a close of an open through which the kernel wrote RAM does: bits set
    /// since the open (which was granted only without them) go if the kernel wrote,
    /// known only by writing home now; otherwise the write-back may wait
    /// (`FileSystem::close_after_kernel_writes`).
    pub(crate) fn close_written(&self, ino: INodeNo, served: crate::Served) -> hscm_fs::Result<()> {
        let privileged = served == crate::Served::PassthroughWritable && self.has_privileges(ino);
        if !privileged {
            return self.fs.close_after_kernel_writes(ino.0).map(|_| ());
        }
        let written = self.fs.write_back_ram(ino.0)?;
        if written > 0 {
            self.drop_privileges_after_unseen_writes(ino);
        }
        Ok(())
    }

    /// The file has setuid, setgid or a capability now.
    pub(crate) fn has_privileges(&self, ino: INodeNo) -> bool {
        self.fs.getattr(ino.0).is_ok_and(|a| a.perm & 0o6000 != 0)
            || self.fs.getxattr(ino.0, CAPABILITY_XATTR).is_ok()
    }

    /// Writes the daemon never saw (an open the kernel writes RAM through, granted
    /// only to a file without setuid, setgid or a capability) went home: bits set
    /// since that open go, as a write on tmpfs drops them (the writer unknown here,
    /// taken as one without CAP_FSETID).
    pub(crate) fn drop_privileges_after_unseen_writes(&self, ino: INodeNo) {
        let setid = self.fs.getattr(ino.0).is_ok_and(|a| a.perm & 0o6000 != 0);
        let dropped = if !setid {
            Ok(())
        } else {
            self.fs
                .setattr(
                    ino.0,
                    hscm_fs::SetAttr {
                        drop_setid: DropSetid::Modify {
                            caller_gid: hscm_fs::NO_GROUP,
                        },
                        ..Default::default()
                    },
                )
                .map(|_| ())
        };
        let capability = self.fs.getxattr(ino.0, CAPABILITY_XATTR).is_ok();
        if capability {
            if let Err(e) = self.fs.removexattr(ino.0, CAPABILITY_XATTR) {
                tracing::warn!("dropping the capability of inode {ino} after a write: {e}");
            }
        }
        match dropped {
            Ok(()) if setid || capability => self.forget_attributes(ino),
            Ok(()) => {}
            Err(e) => tracing::warn!("dropping setuid and setgid of inode {ino}: {e}"),
        }
    }

    /// The setuid and setgid bits a chown or a change of size by `req` drops. With
    /// KILLPRIV_V2 the kernel leaves both to us: a chown always drops them, a
    /// truncate (or fallocate) when the caller lacks CAP_FSETID. fuser does not pass
    /// the kernel's FATTR_KILL_SUIDGID, so a caller other than root stands for one
    /// without CAP_FSETID. Without KILLPRIV_V2 the kernel sends the new mode itself.
    pub(crate) fn setattr_drops(&self, req: &Request, chown: bool, resize: bool) -> DropSetid {
        if !self.kills_setid {
            DropSetid::Keep
        } else if chown {
            DropSetid::Chown {
                caller_gid: req.gid(),
                privileged: req.uid() == 0,
            }
        } else if resize && req.uid() != 0 {
            DropSetid::Modify {
                caller_gid: req.gid(),
            }
        } else {
            DropSetid::Keep
        }
    }
}
