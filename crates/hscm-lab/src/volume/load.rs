//! Warming a volume into RAM: watched with a progress bar, and timed for `hscm volume
//! info --load`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use hscm_volume::{OpenOptions, Volume};
use serde::Serialize;

use crate::units::human_bytes;

/// Waits for warm-up, with a progress bar when a person is watching.
pub fn watch_warmup(vol: &Volume, bar: bool) -> Result<hscm_volume::LoadProgress> {
    let pb = bar.then(|| {
        let pb = indicatif::ProgressBar::new(vol.size());
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "warming {bar:40.cyan/blue} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
            )
            .expect("static template"),
        );
        pb
    });
    loop {
        let p = vol.wait_loaded(Some(Duration::from_millis(100)))?;
        if let Some(pb) = &pb {
            pb.set_position(p.loaded_bytes);
        }
        match p.state {
            hscm_volume::LoadState::Running => continue,
            hscm_volume::LoadState::Done => {
                if let Some(pb) = pb {
                    pb.finish_and_clear();
                }
                return Ok(p);
            }
            hscm_volume::LoadState::Failed(why) => bail!("warm-up failed: {why}"),
            hscm_volume::LoadState::Stopped => bail!("warm-up was stopped"),
        }
    }
}

/// How long a volume took to open and to warm (the `load` object of `hscm volume
/// info --load --json`).
#[derive(Debug, Clone, Serialize)]
pub struct LoadTiming {
    pub open_ms: f64,
    pub warm_s: f64,
    pub warm_mbps: f64,
    pub direct_io: bool,
    pub loaded_chunks: usize,
    #[serde(skip)]
    pub loaded_bytes: u64,
}

/// Opens the flat volume at `path` read-only and waits until it is warm, with a
/// progress bar when `bar`.
pub fn time_load(path: &Path, bar: bool) -> Result<LoadTiming> {
    let t0 = Instant::now();
    let vol = Volume::open(
        path,
        &OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )?;
    let open_ms = t0.elapsed().as_secs_f64() * 1e3;
    let progress = watch_warmup(&vol, bar)?;
    let warm_s = t0.elapsed().as_secs_f64();
    Ok(LoadTiming {
        open_ms,
        warm_s,
        warm_mbps: progress.loaded_bytes as f64 / 1e6 / warm_s,
        direct_io: vol.backend_is_direct(),
        loaded_chunks: progress.loaded_chunks,
        loaded_bytes: progress.loaded_bytes,
    })
}

impl std::fmt::Display for LoadTiming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warm-up       {} in {:.2} s ({:.0} MB/s; open took {:.2} ms; O_DIRECT {})",
            human_bytes(self.loaded_bytes),
            self.warm_s,
            self.warm_mbps,
            self.open_ms,
            if self.direct_io { "on" } else { "off" }
        )
    }
}
