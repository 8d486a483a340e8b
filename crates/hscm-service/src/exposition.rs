//! The Prometheus text exposition (format 0.0.4) of a [`Status`]: `hscm_` names, base
//! units (bytes, seconds), `_total` counters, and labels only from small fixed sets
//! (operation, tier, error kind), never a path or a client.
//!
//! Written here rather than through a client library: the metrics are a rendering of
//! one snapshot taken per scrape, not objects updated on the hot path, and the format
//! is a few line shapes (the tests parse it with Python's `prometheus_client`).

use std::fmt::Write as _;

use crate::status::Status;

/// Every metric family this renders, with its type: the Grafana dashboard's queries
/// are checked against these names.
pub const FAMILIES: &[(&str, &str)] = &[
    ("hscm_build_info", "gauge"),
    ("hscm_info", "gauge"),
    ("hscm_start_time_seconds", "gauge"),
    ("hscm_healthy", "gauge"),
    ("hscm_home_reachable", "gauge"),
    ("hscm_home_reconnects_total", "counter"),
    ("hscm_home_failed_requests_total", "counter"),
    ("hscm_fuse_ring_requests_total", "counter"),
    ("hscm_volume_size_bytes", "gauge"),
    ("hscm_volume_used_bytes", "gauge"),
    ("hscm_load_loaded_bytes", "gauge"),
    ("hscm_load_total_bytes", "gauge"),
    ("hscm_load_done", "gauge"),
    ("hscm_dirty_bytes", "gauge"),
    ("hscm_dirty_max_bytes", "gauge"),
    ("hscm_journal_size_bytes", "gauge"),
    ("hscm_journal_in_use_bytes", "gauge"),
    ("hscm_journal_batches_total", "counter"),
    ("hscm_journal_records_total", "counter"),
    ("hscm_checkpoints_total", "counter"),
    ("hscm_device_reads_total", "counter"),
    ("hscm_device_read_bytes_total", "counter"),
    ("hscm_device_writes_total", "counter"),
    ("hscm_device_written_bytes_total", "counter"),
    ("hscm_device_syncs_total", "counter"),
    ("hscm_operations_total", "counter"),
    ("hscm_operation_bytes_total", "counter"),
    ("hscm_operation_errors_total", "counter"),
    ("hscm_operation_duration_seconds", "histogram"),
    ("hscm_tier_hits_total", "counter"),
    ("hscm_tier_misses_total", "counter"),
    ("hscm_tier_promotions_total", "counter"),
    ("hscm_tier_evictions_total", "counter"),
    ("hscm_tier_demotions_total", "counter"),
    ("hscm_tier_written_back_blocks_total", "counter"),
    ("hscm_tier_dirty_bytes", "gauge"),
    ("hscm_tier_occupancy_bytes", "gauge"),
    ("hscm_tier_capacity_bytes", "gauge"),
    ("hscm_fs_size_bytes", "gauge"),
    ("hscm_fs_free_bytes", "gauge"),
    ("hscm_fs_files", "gauge"),
    ("hscm_fs_files_free", "gauge"),
    ("hscm_fs_ram_bytes", "gauge"),
    ("hscm_mirror_generation", "gauge"),
    ("hscm_mirror_members_in_sync", "gauge"),
    ("hscm_mirror_quorum", "gauge"),
    ("hscm_mirror_fenced", "gauge"),
    ("hscm_mirror_crash_copy_bytes", "gauge"),
    ("hscm_mirror_member_in_sync", "gauge"),
    ("hscm_mirror_member_to_copy_bytes", "gauge"),
    ("hscm_mirror_member_copied_bytes_total", "counter"),
    ("hscm_clients", "gauge"),
    ("hscm_clients_total", "counter"),
    ("hscm_errors_total", "counter"),
];

/// The content type Prometheus expects for this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A labelled family: its name, its help, and its value for one item.
type Family<T> = (&'static str, &'static str, fn(&T) -> u64);

struct Writer {
    out: String,
}

impl Writer {
    fn family(&mut self, name: &str, help: &str) {
        let kind = FAMILIES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("untyped", |(_, k)| k);
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }

    /// One family per row of `families` (name, help, the value of an item), each with
    /// a sample per item labelled `label` = `label_of(item)`.
    fn labelled<T>(
        &mut self,
        families: &[Family<T>],
        label: &str,
        items: &[T],
        label_of: fn(&T) -> &String,
    ) {
        for (name, help, value) in families {
            self.family(name, help);
            for item in items {
                self.sample(name, &[(label, label_of(item))], value(item) as f64);
            }
        }
    }

    /// A family of one unlabelled sample.
    fn one(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, help);
        self.sample(name, &[], value);
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

/// `s` as the text Prometheus scrapes.
pub fn render(s: &Status) -> String {
    let mut w = Writer { out: String::new() };
    w.family(
        "hscm_build_info",
        "The hscm that serves, as a label; always 1.",
    );
    w.sample("hscm_build_info", &[("version", &s.version)], 1.0);
    w.family(
        "hscm_info",
        "What this instance serves: its front-end and the volume's kind; always 1.",
    );
    w.sample(
        "hscm_info",
        &[
            ("frontend", &s.frontend),
            ("kind", &s.kind),
            ("durability", &s.durability),
        ],
        1.0,
    );
    w.one(
        "hscm_start_time_seconds",
        "When it started serving, in seconds since the Unix epoch.",
        s.started_at as f64,
    );
    w.one(
        "hscm_healthy",
        "1 while it accepts writes; 0 once a failed write or sync made it refuse them (hscm status says why).",
        if s.health.ok { 1.0 } else { 0.0 },
    );
    if let Some(h) = &s.home {
        w.one(
            "hscm_home_reachable",
            "1 while the home on the network (an NBD export) answers; 0 after a request to it failed.",
            if h.reachable { 1.0 } else { 0.0 },
        );
        w.one(
            "hscm_home_reconnects_total",
            "Connections to the home on the network lost and made again.",
            h.reconnects as f64,
        );
        w.one(
            "hscm_home_failed_requests_total",
            "Requests to the home on the network that failed after their retries.",
            h.failed_requests as f64,
        );
    }
    if let Some(m) = &s.mirror {
        w.one(
            "hscm_mirror_generation",
            "The mirrored home's generation (raised by each promotion).",
            m.generation as f64,
        );
        w.one(
            "hscm_mirror_members_in_sync",
            "Members of the mirrored home in sync now, the local one included.",
            m.in_sync as f64,
        );
        w.one(
            "hscm_mirror_quorum",
            "Members that must be in sync for a write to be acknowledged.",
            m.quorum as f64,
        );
        w.one(
            "hscm_mirror_fenced",
            "1 once another primary was promoted and this one refuses writes for good.",
            if m.fenced.is_some() { 1.0 } else { 0.0 },
        );
        w.one(
            "hscm_mirror_crash_copy_bytes",
            "The most a crash of the primary now makes resync copy to each member.",
            m.crash_copy_bytes as f64,
        );
        let members: &[Family<crate::MirrorMember>] = &[
            (
                "hscm_mirror_member_in_sync",
                "1 while the member holds every acknowledged write and answers.",
                |x| u64::from(x.state == "in-sync" && x.absent.is_none()),
            ),
            (
                "hscm_mirror_member_to_copy_bytes",
                "Bytes resync must still copy to the member.",
                |x| x.to_copy_bytes,
            ),
            (
                "hscm_mirror_member_copied_bytes_total",
                "Bytes resync copied to the member since start.",
                |x| x.copied_bytes,
            ),
        ];
        w.labelled(members, "member", &m.members, |x| &x.name);
    }
    if let Some(fuse) = &s.fuse {
        w.one(
            "hscm_fuse_ring_requests_total",
            "Requests a mount's FUSE over io_uring rings carried (0 on /dev/fuse).",
            fuse.ring_requests as f64,
        );
    }
    w.one(
        "hscm_volume_size_bytes",
        "The volume's size (a file system's data area).",
        s.size_bytes as f64,
    );
    if let Some(used) = s.used_bytes {
        w.one("hscm_volume_used_bytes", "Bytes in use.", used as f64);
    }
    w.one(
        "hscm_load_loaded_bytes",
        "Bytes of the RAM copy loaded from the device.",
        s.load.loaded_bytes as f64,
    );
    w.one(
        "hscm_load_total_bytes",
        "Bytes the RAM copy loads in all (0 where RAM fills on demand).",
        s.load.total_bytes as f64,
    );
    w.one(
        "hscm_load_done",
        "1 once loading has ended (or there is nothing to load).",
        if s.load.state == "running" { 0.0 } else { 1.0 },
    );
    w.one(
        "hscm_dirty_bytes",
        "Bytes acknowledged and not yet on the home device.",
        s.dirty_bytes as f64,
    );
    if let Some(max) = s.dirty_max_bytes {
        w.one(
            "hscm_dirty_max_bytes",
            "The most dirty bytes before writers wait.",
            max as f64,
        );
    }
    if let Some(j) = &s.journal {
        w.one(
            "hscm_journal_size_bytes",
            "The journal's size.",
            j.size_bytes as f64,
        );
        w.one(
            "hscm_journal_in_use_bytes",
            "Journal bytes since the last checkpoint: what a crash now would replay.",
            j.in_use_bytes as f64,
        );
        w.one(
            "hscm_journal_batches_total",
            "Journal batches written.",
            j.batches as f64,
        );
        w.one(
            "hscm_journal_records_total",
            "Journal records written.",
            j.records as f64,
        );
        w.one(
            "hscm_checkpoints_total",
            "Checkpoints completed.",
            j.checkpoints as f64,
        );
    }
    let d = &s.device;
    for (name, help, v) in [
        ("hscm_device_reads_total", "Reads sent to the devices.", d.reads),
        (
            "hscm_device_read_bytes_total",
            "Bytes read from the devices (0 where the engine counts requests only).",
            d.read_bytes,
        ),
        (
            "hscm_device_writes_total",
            "Writes sent to the devices.",
            d.writes,
        ),
        (
            "hscm_device_written_bytes_total",
            "Bytes written to the devices: the flash wear (0 where the engine counts requests only).",
            d.written_bytes,
        ),
        (
            "hscm_device_syncs_total",
            "Syncs (fdatasync) of the devices.",
            d.syncs,
        ),
    ] {
        w.one(name, help, v as f64);
    }
    ops(&mut w, s);
    tiers(&mut w, s);
    if let Some(fs) = &s.fs {
        w.one(
            "hscm_fs_size_bytes",
            "The file system's data area.",
            fs.size_bytes as f64,
        );
        w.one(
            "hscm_fs_free_bytes",
            "Bytes free for file data.",
            fs.free_bytes as f64,
        );
        w.one(
            "hscm_fs_files",
            "Inodes in use plus those free.",
            fs.files as f64,
        );
        w.one(
            "hscm_fs_files_free",
            "Inodes the metadata area still has room for.",
            fs.free_files as f64,
        );
        w.one(
            "hscm_fs_ram_bytes",
            "Bytes of file data held in RAM.",
            fs.ram_bytes as f64,
        );
    }
    w.one(
        "hscm_clients",
        "Clients connected now.",
        s.clients.connected as f64,
    );
    w.one(
        "hscm_clients_total",
        "Clients connected since start.",
        s.clients.total as f64,
    );
    w.family("hscm_errors_total", "Errors since start, by kind.");
    for (kind, n) in &s.errors {
        w.sample("hscm_errors_total", &[("kind", kind)], *n as f64);
    }
    w.out
}

fn ops(w: &mut Writer, s: &Status) {
    let counters: [Family<crate::status::Op>; 3] = [
        (
            "hscm_operations_total",
            "Requests served successfully, by operation.",
            |o| o.count,
        ),
        (
            "hscm_operation_bytes_total",
            "Bytes those requests moved, by operation.",
            |o| o.bytes,
        ),
        (
            "hscm_operation_errors_total",
            "Requests answered with an error, by operation.",
            |o| o.errors,
        ),
    ];
    w.labelled(&counters, "op", &s.ops, |o| &o.op);
    w.family(
        "hscm_operation_duration_seconds",
        "How long requests took in the engine, by operation (failures included).",
    );
    for o in &s.ops {
        let mut cumulative = 0u64;
        for (i, n) in o.latency_buckets.iter().enumerate() {
            cumulative += n;
            let le = match hscm_block::LATENCY_BOUNDS_S.get(i) {
                Some(b) => number(*b),
                None => "+Inf".into(),
            };
            w.sample(
                "hscm_operation_duration_seconds_bucket",
                &[("op", &o.op), ("le", &le)],
                cumulative as f64,
            );
        }
        w.sample(
            "hscm_operation_duration_seconds_sum",
            &[("op", &o.op)],
            o.latency_sum_s,
        );
        w.sample(
            "hscm_operation_duration_seconds_count",
            &[("op", &o.op)],
            cumulative as f64,
        );
    }
}

fn tiers(w: &mut Writer, s: &Status) {
    if s.tiers.is_empty() {
        return;
    }
    let rows: [Family<crate::status::Tier>; 9] = [
        (
            "hscm_tier_hits_total",
            "Block lookups that found the block in the tier.",
            |t| t.hits,
        ),
        (
            "hscm_tier_misses_total",
            "Block lookups that did not.",
            |t| t.misses,
        ),
        (
            "hscm_tier_promotions_total",
            "Blocks that entered the tier.",
            |t| t.promotions,
        ),
        (
            "hscm_tier_evictions_total",
            "Blocks that left the tier to make room.",
            |t| t.evictions,
        ),
        (
            "hscm_tier_demotions_total",
            "Dirty blocks that left the tier, written home first.",
            |t| t.demotions,
        ),
        (
            "hscm_tier_written_back_blocks_total",
            "Blocks the tier wrote back to home.",
            |t| t.written_back,
        ),
        (
            "hscm_tier_dirty_bytes",
            "Bytes whose only durable copy is in the tier.",
            |t| t.dirty_bytes,
        ),
        (
            "hscm_tier_occupancy_bytes",
            "Bytes of blocks the tier holds.",
            |t| t.occupancy_bytes,
        ),
        (
            "hscm_tier_capacity_bytes",
            "Bytes of blocks the tier can hold.",
            |t| t.capacity_bytes,
        ),
    ];
    w.labelled(&rows, "tier", &s.tiers, |t| &t.tier);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Op, Tier};

    #[test]
    fn every_family_rendered_is_declared_with_a_type_and_names_follow_the_conventions() {
        let mut s = Status {
            version: "0.1.0".into(),
            frontend: "nbd".into(),
            kind: "tiered".into(),
            used_bytes: Some(1),
            dirty_max_bytes: Some(2),
            journal: Some(Default::default()),
            fs: Some(Default::default()),
            ..Default::default()
        };
        s.ops.push(Op {
            op: "read".into(),
            count: 3,
            latency_buckets: vec![1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            latency_sum_s: 0.5,
            ..Default::default()
        });
        s.tiers.push(Tier {
            tier: "dram".into(),
            ..Default::default()
        });
        s.errors.insert("protocol".into(), 2);
        let text = render(&s);
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut parts = line.split(' ').skip(2);
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            assert!(FAMILIES.contains(&(name, kind)), "{line}");
            assert!(name.starts_with("hscm_"));
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
        }
        assert!(text.contains("hscm_operation_duration_seconds_bucket{op=\"read\",le=\"+Inf\"} 4"));
        assert!(text.contains("hscm_operation_duration_seconds_count{op=\"read\"} 4"));
        assert!(text.contains("hscm_errors_total{kind=\"protocol\"} 2"));
        assert!(text.contains("hscm_tier_hits_total{tier=\"dram\"} 0"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
