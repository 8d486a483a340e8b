//! Where the members of a mirrored home ([`crate::mirror`]) stand: their states, the
//! quorum policy, and the status the device layer reports for `hscm status`. Apart
//! from the mirror itself, so the device layer can name them without depending on it.

/// Where a member stands against the primary's local copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Holds every write the primary acknowledged.
    InSync,
    /// Missed writes while away; the primary's write-intent bitmap says which regions.
    Behind,
    /// Needs a full copy (a new member, after a promotion or an unclean stop).
    NeedsFull,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::InSync => "in-sync",
            MemberState::Behind => "behind",
            MemberState::NeedsFull => "needs-full-copy",
        }
    }
    pub(crate) fn code(self) -> u8 {
        match self {
            MemberState::InSync => 0,
            MemberState::Behind => 1,
            MemberState::NeedsFull => 2,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<MemberState> {
        Some(match c {
            0 => MemberState::InSync,
            1 => MemberState::Behind,
            2 => MemberState::NeedsFull,
            _ => return None,
        })
    }
}

/// What the primary does when fewer members than the quorum are in sync (DRBD's
/// `on-no-quorum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnNoQuorum {
    /// Fail writes and flushes at once with ETIMEDOUT (reads go on); they pass again
    /// once enough members are back in sync.
    #[default]
    IoError,
    /// Hold writes and flushes until enough members are back in sync, at most
    /// [`crate::mirror::SUSPEND_LIMIT`], then fail them as `IoError` does.
    SuspendIo,
}

impl OnNoQuorum {
    pub fn name(self) -> &'static str {
        match self {
            OnNoQuorum::IoError => "io-error",
            OnNoQuorum::SuspendIo => "suspend-io",
        }
    }
    pub fn parse(s: &str) -> Result<OnNoQuorum, String> {
        match s {
            "io-error" => Ok(OnNoQuorum::IoError),
            "suspend-io" => Ok(OnNoQuorum::SuspendIo),
            other => Err(format!(
                "{other:?}: the choices are io-error (fail writes at once) and suspend-io (hold them)"
            )),
        }
    }
}

/// One member's standing, for `hscm status`, the metrics and `hscm volume mirror`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    pub name: String,
    pub state: MemberState,
    /// Why it does not answer now (None: it does).
    pub absent: Option<String>,
    /// Bytes still to copy to it.
    pub to_copy: u64,
    /// Bytes copied to it by resync since this opener started.
    pub copied: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorStatus {
    pub generation: u64,
    pub epoch: u64,
    pub needed: usize,
    pub in_sync: usize,
    pub on_no_quorum: OnNoQuorum,
    /// Why writes are refused for good (another primary took over).
    pub fenced: Option<String>,
    /// Member 0 is the local one.
    pub members: Vec<MemberStatus>,
    /// The most a crash of the primary now makes the resync copy to each member: the
    /// extents its activity log lists (docs/mirror.md).
    pub crash_copy: u64,
}
