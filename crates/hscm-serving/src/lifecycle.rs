//! What serving shares beyond opening: the stop flag signals set, and the thread that
//! saves a tiered volume's counters while it serves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hscm_tier::TieredVolume;

use crate::{Error, Result};

/// A flag SIGINT and SIGTERM set. Install it before anything can connect (or while
/// the volume opens), so a stop request at any moment ends the server cleanly instead
/// of killing it mid-write.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(Error::Signals)?;
    }
    Ok(stop)
}

/// Saves a tiered volume's counters every `every` (state `open`), so `hscm volume
/// stats` reads a served volume's figures; stopped when dropped (at close, which then
/// saves `closed`, or when an opened volume is dropped on an error path).
pub(crate) struct StatsSaver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the saver looks at its stop flag: a close waits at most this long.
const TICK: Duration = Duration::from_millis(100);

impl StatsSaver {
    pub(crate) fn start(volume: Arc<TieredVolume>, every: Duration) -> StatsSaver {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let ticks_per_save = (every.as_millis() / TICK.as_millis()).max(1);
                let mut tick = 0u128;
                while !stop.load(Ordering::Relaxed) {
                    if tick % ticks_per_save == 0 {
                        if let Err(e) = volume.save_stats("open") {
                            tracing::warn!("saving the tiered volume's counters: {e}");
                        }
                    }
                    tick += 1;
                    std::thread::sleep(TICK);
                }
            })
        };
        StatsSaver {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for StatsSaver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
