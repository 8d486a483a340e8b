//! Blocking on and waking words in the shared region (process-shared futexes).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::thread::futex;

/// Blocks while `word == expected`, at most `timeout`. Spurious returns are fine: every
/// caller re-checks its condition.
pub fn sleep_on(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = rustix::thread::futex::Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // Not FUTEX_PRIVATE: the other side is another process mapping the same memfd.
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(ts));
}

/// Rings a doorbell after publishing work (or closing): bumps its counter and wakes
/// the other side if it sleeps or is about to (see [`crate::ring::ring_doorbell`]).
pub fn ring(doorbell: &AtomicU32) {
    if crate::ring::ring_doorbell(doorbell) {
        let _ = futex::wake(doorbell, futex::Flags::empty(), i32::MAX as u32);
    }
}

/// How long a waiting side polls without giving up its core (no `sched_yield`), before
/// it starts yielding between polls. A yield is a system call: when nothing else is
/// runnable (the usual case on a machine with a core for each side) it only delays
/// the poll that would have seen the answer, by a few hundred nanoseconds here, which
/// at 4 KiB is a third of a whole read. When threads outnumber cores, a few
/// microseconds of polling is the most either side keeps from the other.
pub const BUSY_SPIN: Duration = Duration::from_micros(4);

/// How a side waits for the other: sleep at once ("interrupt"), spin ("poll"), or spin
/// for a while and then sleep ("adaptive").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    Interrupt,
    Poll,
    Adaptive { spin: Duration },
}

impl WaitMode {
    pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);

    pub fn adaptive() -> WaitMode {
        WaitMode::Adaptive {
            spin: Self::DEFAULT_SPIN,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            WaitMode::Interrupt => "interrupt",
            WaitMode::Poll => "poll",
            WaitMode::Adaptive { .. } => "adaptive",
        }
    }

    /// How long to spin before sleeping while `bytes` of data are in flight: the
    /// adaptive spin grows by a nanosecond a byte, so a large transfer is waited for
    /// as long as a copy at a slow 1 GB/s would take. Waking from a sleep costs tens
    /// of microseconds on a VM whose idle vCPU halts, more than a whole 512 KiB read
    /// from RAM; a wait past that time is for something slower (a write going to
    /// disk), worth sleeping through. None spins for ever.
    pub fn spin_for(&self, bytes: u64) -> Option<Duration> {
        match *self {
            WaitMode::Interrupt => Some(Duration::ZERO),
            WaitMode::Poll => None,
            WaitMode::Adaptive { spin } => Some(spin + Duration::from_nanos(bytes)),
        }
    }
}

impl std::str::FromStr for WaitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "interrupt" => Ok(WaitMode::Interrupt),
            "poll" => Ok(WaitMode::Poll),
            "adaptive" => Ok(WaitMode::adaptive()),
            _ => Err(format!(
                "wait mode `{s}`: expected interrupt, poll or adaptive"
            )),
        }
    }
}
