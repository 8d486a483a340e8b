//! Injected failures by count: the `n`-th write or sync from now fails, and every one
//! after it (after a failed fsync a device is not trusted again). One counter for the
//! volume's `FaultyBackend` and the key-value store's `FaultyDisks`.

use std::io;

#[derive(Debug, Default, Clone)]
pub struct Countdown {
    writes: u64,
    syncs: u64,
    fail_write_at: Option<(u64, i32)>,
    fail_sync_at: Option<u64>,
}

impl Countdown {
    /// The `n`-th write from now (0 = the next) fails with `errno`, and all after it.
    pub fn fail_write_after(&mut self, n: u64, errno: i32) {
        self.fail_write_at = Some((self.writes + n, errno));
    }

    /// The `n`-th sync from now (0 = the next) fails with EIO, and all after it.
    pub fn fail_sync_after(&mut self, n: u64) {
        self.fail_sync_at = Some(self.syncs + n);
    }

    /// Counts one write: its injected error, if it is due.
    pub fn write(&mut self) -> io::Result<()> {
        let n = self.writes;
        self.writes += 1;
        match self.fail_write_at {
            Some((at, errno)) if n >= at => Err(io::Error::from_raw_os_error(errno)),
            _ => Ok(()),
        }
    }

    /// Counts one sync: EIO, if a failure is due.
    pub fn sync(&mut self) -> io::Result<()> {
        let n = self.syncs;
        self.syncs += 1;
        match self.fail_sync_at {
            Some(at) if n >= at => Err(io::Error::from_raw_os_error(5)),
            _ => Ok(()),
        }
    }

    pub fn writes(&self) -> u64 {
        self.writes
    }

    pub fn syncs(&self) -> u64 {
        self.syncs
    }
}
