//! Running independent simulations side by side, with one progress line.

use indicatif::{ProgressBar, ProgressStyle};

/// `f` on every item, at most one thread per core, results in item order.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: std::sync::Mutex<Vec<Option<R>>> =
        std::sync::Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                slots.lock().expect("no panic while held")[i] = Some(r);
            });
        }
    });
    slots
        .into_inner()
        .expect("threads joined")
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// A spinner counting `unit`s (e.g. "requests") with their rate.
pub fn spinner(msg: String, unit: &str) -> ProgressBar {
    let b = ProgressBar::new_spinner();
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} {{human_pos}} {unit} ({{per_sec}}, {{elapsed}})"
        ))
        .expect("valid template"),
    );
    b.set_message(msg);
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}

/// A progress callback for one of several runs sharing `bar`: the runs report their
/// own running totals, the bar adds up the increments.
pub fn ticker(bar: Option<&ProgressBar>) -> impl FnMut(u64) + '_ {
    let mut last = 0;
    move |n: u64| {
        if let Some(b) = bar {
            b.inc(n - last);
        }
        last = n;
    }
}
