//! systemd's side of a service (sd_notify(3)): readiness once the volume serves, the
//! watchdog while it runs, and, while it stops, more time for as long as the flush
//! needs. Outside systemd (no `NOTIFY_SOCKET`) every call does nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sd_notify::NotifyState;

use crate::Probe;

/// How much more time each stop extension asks for, and how often one is sent.
const STOP_EXTENSION: Duration = Duration::from_secs(30);
const STOP_TICK: Duration = Duration::from_secs(10);
/// Extensions end after this long: a stop that hangs is then killed by systemd at
/// its timeout, as it should be.
const STOP_MOST: Duration = Duration::from_secs(15 * 60);

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!("telling the service manager: {e}");
    }
}

/// READY=1, with a one-line status for `systemctl status`.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// The watchdog interval systemd asked for (`WatchdogSec=`), if any, for this process.
pub fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0u64;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec))
}

/// A thread pinging the watchdog at half its interval, each time after `probe`
/// answered: an instance whose engine hangs (a lock never released) stops pinging
/// and systemd restarts it.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(probe: Probe) -> Option<Watchdog> {
        let interval = watchdog_interval()? / 2;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("hscm-watchdog".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = probe();
                        send(&[NotifyState::Watchdog]);
                        sleep_unless(&stop, interval);
                    }
                })
                .ok()?
        };
        Some(Watchdog {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn sleep_unless(stop: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(50);
    let mut slept = Duration::ZERO;
    while slept < total && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(step.min(total - slept));
        slept += step;
    }
}

/// STOPPING=1, then more time every few seconds until dropped (for at most
/// `STOP_MOST`): the flush and close that follow take as long as what is dirty needs,
/// which can exceed `TimeoutStopSec` on a slow device.
pub struct Stopping {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stopping {
    pub fn begin() -> Stopping {
        send(&[NotifyState::Stopping]);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("hscm-stopping".into())
                .spawn(move || {
                    let usec = STOP_EXTENSION.as_micros() as u32;
                    let started = std::time::Instant::now();
                    while !stop.load(Ordering::Relaxed) && started.elapsed() < STOP_MOST {
                        send(&[
                            NotifyState::ExtendTimeoutUsec(usec),
                            NotifyState::Status("flushing and closing the volume"),
                        ]);
                        sleep_unless(&stop, STOP_TICK);
                    }
                })
                .ok()
        };
        Stopping { stop, thread }
    }
}

impl Drop for Stopping {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
