//! A network home that stops answering (docs/remote.md). A local device that fails a
//! write or a sync fails the volume for good: after a failed fsync nothing can be
//! trusted. A network home whose requests time out is different: its client keeps
//! every write the server acknowledged until a flush covers it, and writes them again
//! after it reconnects, so a flush that succeeds later is a true one. So a volume
//! written in place on a network home, when a request to it times out, waits for it
//! instead: writes and flushes are refused with an error that says so, reads go on
//! from RAM, and a watcher thread tries a flush now and then. Once one succeeds, it
//! writes again, from RAM, every range whose write failed (the home may hold the
//! failed write or not; RAM holds what was acknowledged), and lets writes in again.
//!
//! Volumes with a journal or in write-back sessions still fail for good on a home
//! error: their replay state is not written again here.

use std::io;

use hscm_durable::Failure;

use super::*;

/// How often the watcher tries the home while it is away.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// ETIMEDOUT: what a write refused while the home is away reports.
const ETIMEDOUT: i32 = rustix::io::Errno::TIMEDOUT.raw_os_error();

/// Whether the home is away, why, and which volume ranges to write again.
#[derive(Default)]
pub(super) struct Away {
    state: Mutex<Option<AwayState>>,
}

struct AwayState {
    reason: String,
    /// (volume offset, bytes), whole sectors: writes the home did not acknowledge.
    ranges: Vec<(u64, u64)>,
}

/// The watcher, for a volume whose home may go away and come back.
pub(super) fn watch_home(shared: &Arc<Shared>) -> Option<JoinHandle<()>> {
    if !shared.home_can_go_away() {
        return None;
    }
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("hscm-home-watch".into())
        .spawn(move || s.guarded("home watch", || s.run_home_watch()))
        .ok()
}

impl Volume {
    /// Why writes are refused while a network home is away (None when it answers);
    /// unlike [`Volume::failure`], this passes once the home answers again.
    pub fn home_away(&self) -> Option<String> {
        self.shared.check_home().err().map(|e| e.to_string())
    }

    /// Each member of a mirrored home (docs/mirror.md); None for any other home.
    pub fn mirror_status(&self) -> Option<hscm_durable::mirror::MirrorStatus> {
        self.shared.backend.mirror_status()
    }
}

impl Shared {
    /// A network home, written in place: the volume can wait for it.
    pub(super) fn home_can_go_away(&self) -> bool {
        !self.read_only
            && self.journal.is_none()
            && self.writeback.is_none()
            && self.backend.remote_health().is_some()
    }

    /// Err while the home is away.
    pub(super) fn check_home(&self) -> Result<()> {
        match self.away.state.lock().as_ref() {
            None => Ok(()),
            Some(a) => Err(Error::from(Failure {
                reason: format!(
                    "{}'s home is not answering ({}); writes are refused until it answers again, reads go on",
                    self.name, a.reason
                ),
                errno: Some(ETIMEDOUT),
            })),
        }
    }

    /// A request to the home failed with `e`. A network home that timed out makes the
    /// volume wait for it, remembering `range` to write again; true then. Anything
    /// else is for the caller to fail the volume with.
    pub(super) fn home_failed(&self, why: &str, e: &io::Error, range: Option<(u64, u64)>) -> bool {
        if !self.home_can_go_away() || e.kind() != io::ErrorKind::TimedOut {
            return false;
        }
        let mut st = self.away.state.lock();
        match st.as_mut() {
            Some(a) => a.ranges.extend(range),
            None => {
                tracing::error!(volume = %self.name, "{why}; writes are refused until the home answers again");
                *st = Some(AwayState {
                    reason: why.to_string(),
                    ranges: range.into_iter().collect(),
                });
            }
        }
        true
    }

    /// While the home is away: a flush (the client reconnects, writes again what the
    /// server acknowledged and no flush covered, and flushes); once one succeeds, the
    /// failed ranges from RAM, then writes are let in.
    pub(super) fn run_home_watch(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(WATCH_EVERY);
            if self.away.state.lock().is_none() || self.failure.get().is_some() {
                continue;
            }
            if self.backend.sync().is_ok() {
                // What it could not write yet stays for the next round.
                let _ = self.rewrite_failed_ranges();
            }
        }
    }

    fn rewrite_failed_ranges(&self) -> io::Result<()> {
        loop {
            let ranges = {
                let mut st = self.away.state.lock();
                let Some(a) = st.as_mut() else {
                    return Ok(());
                };
                if a.ranges.is_empty() {
                    *st = None;
                    tracing::info!(volume = %self.name, "the home answers again; writes are accepted");
                    return Ok(());
                }
                std::mem::take(&mut a.ranges)
            };
            for (i, &(start, len)) in ranges.iter().enumerate() {
                if let Err(e) = self.rewrite_from_ram(start, len) {
                    if let Some(a) = self.away.state.lock().as_mut() {
                        a.ranges.extend_from_slice(&ranges[i..]);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Writes `[start, start + len)` home again, durably, from RAM where its chunks
    /// are loaded. A chunk not loaded yet has only home's copy, which the loader
    /// will read: whichever the home kept of the failed write, reads agree with it.
    fn rewrite_from_ram(&self, start: u64, len: u64) -> io::Result<()> {
        let (first, last) = (self.chunk_of(start), self.chunk_of(start + len - 1));
        // Held like a writer's (`ranges`), so no write of these sectors is under way.
        let _sectors_held = self.writing.hold(start, start + len);
        let _io: Vec<MutexGuard<'_, ()>> =
            (first..=last).map(|c| self.chunks[c].io.lock()).collect();
        for c in first..=last {
            if !self.is_loaded(c) {
                continue;
            }
            let (cs, ce) = self.chunk_range(c);
            let (s, e) = (start.max(cs), (start + len).min(ce));
            let mut buf = AlignedBuf::zeroed((e - s) as usize);
            // SAFETY: we hold chunk c's io lock, which every RAM writer also holds
            // while it writes RAM, and c is Loaded (checked under that lock).
            unsafe { self.ram.copy_out(s as usize, &mut buf) };
            self.backend
                .write_through_at(self.header.data_offset() + s, &buf)?;
        }
        Ok(())
    }
}
