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

    /// How long to spin before sleeping; None spins for ever.
    pub fn spin(&self) -> Option<Duration> {
        match *self {
            WaitMode::Interrupt => Some(Duration::ZERO),
            WaitMode::Poll => None,
            WaitMode::Adaptive { spin } => Some(spin),
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
