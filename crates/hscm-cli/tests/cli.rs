//! The `hscm` command as a user meets it: exit codes and messages.

use crate::util;

use util::{run as hscm, text};

#[test]
fn create_info_check_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hscm");
    let ps = p.to_str().unwrap();
    let o = hscm(&["volume", "create", ps, "--size", "8M", "--chunk", "256k"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = hscm(&["volume", "check", ps]);
    assert!(
        o.status.success() && text(&o).contains("ok"),
        "{}",
        text(&o)
    );
    let o = hscm(&["volume", "info", ps, "--json", "--load"]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["volume_size"], 8 << 20);
    assert_eq!(j["chunks"], 32);
    assert_eq!(j["load"]["loaded_chunks"], 32);
    // Format 2, no journal by default, cleanly created: nothing to replay.
    assert_eq!(j["format_version"], 2);
    assert_eq!(j["journal_len"], 0);
    assert_eq!(j["data_offset"], 12288);
    assert_eq!(j["journal_pending_batches"], 0);
    // With a journal.
    let pj = dir.path().join("journal.hscm");
    let pjs = pj.to_str().unwrap();
    let o = hscm(&["volume", "create", pjs, "--size", "1M", "--journal", "1M"]);
    assert!(
        o.status.success() && text(&o).contains("journal 1 MiB"),
        "{}",
        text(&o)
    );
    let o = hscm(&["volume", "check", pjs, "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (j["journal_len"].as_u64(), j["ok"].as_bool()),
        (Some(1 << 20), Some(true))
    );
    let o = hscm(&[
        "volume",
        "create",
        pjs,
        "--size",
        "1M",
        "--journal",
        "8k",
        "--force",
    ]);
    assert!(
        !o.status.success() && text(&o).contains("journal size"),
        "{}",
        text(&o)
    );
    // Creating over an existing file needs --force.
    let o = hscm(&["volume", "create", ps, "--size", "8M"]);
    assert!(
        !o.status.success() && text(&o).contains("--force"),
        "{}",
        text(&o)
    );
    let o = hscm(&["volume", "create", ps, "--size", "4M", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn check_fails_loudly_on_damage() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hscm");
    let ps = p.to_str().unwrap();
    assert!(hscm(&["volume", "create", ps, "--size", "1M"])
        .status
        .success());
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[17] ^= 0xff;
    std::fs::write(&p, &bytes).unwrap();
    let o = hscm(&["volume", "check", ps]);
    assert!(!o.status.success(), "a damaged header passed the check");
    assert!(
        text(&o).contains("checksum") && text(&o).contains("v.hscm"),
        "{}",
        text(&o)
    );
    // Both checkpoint slots of a journaled volume damaged: the journal cannot be
    // replayed, and check says so instead of passing.
    let pj = dir.path().join("j.hscm");
    let pjs = pj.to_str().unwrap();
    assert!(
        hscm(&["volume", "create", pjs, "--size", "1M", "--journal", "256k"])
            .status
            .success()
    );
    let mut bytes = std::fs::read(&pj).unwrap();
    bytes[4096 + 30] ^= 1;
    bytes[8192..12288].fill(0xaa);
    std::fs::write(&pj, &bytes).unwrap();
    let o = hscm(&["volume", "check", pjs]);
    assert!(
        !o.status.success() && text(&o).contains("checkpoint"),
        "{}",
        text(&o)
    );
    let o = hscm(&[
        "volume",
        "check",
        dir.path().join("missing").to_str().unwrap(),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("missing"),
        "{}",
        text(&o)
    );
}

#[test]
fn bad_arguments_are_explained() {
    let o = hscm(&["volume", "create", "/tmp/x", "--size", "4X"]);
    assert!(
        !o.status.success() && text(&o).contains("unknown unit"),
        "{}",
        text(&o)
    );
    let o = hscm(&["volume", "create", "/tmp/x", "--size", "1000"]);
    assert!(
        !o.status.success() && text(&o).contains("multiple of 4096"),
        "{}",
        text(&o)
    );
    let o = hscm(&["bench", "volume", "--durability", "sometimes"]);
    assert!(
        !o.status.success() && text(&o).contains("immediate, on-flush or write-back"),
        "{}",
        text(&o)
    );
}

#[test]
fn bench_volume_json_contract() {
    let dir = tempfile::tempdir().unwrap();
    let o = hscm(&[
        "bench",
        "volume",
        "--workload",
        "mixed",
        "--bs",
        "1000",
        "--threads",
        "2",
        "--seconds",
        "0.2",
        "--size",
        "8M",
        "--journal",
        "1M",
        "--path",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["workload"], "mixed");
    assert_eq!(j["bs"], 1000);
    assert_eq!(j["threads"], 2);
    // The default, as for volumes.
    assert_eq!(j["durability"], "immediate");
    for k in ["iops", "mbps", "p50_us", "p99_us"] {
        assert!(j["ours"][k].as_f64().unwrap() > 0.0, "ours.{k}");
    }
    for b in ["odirect", "pagecache", "memcpy"] {
        assert!(
            j["baselines"][b]["iops"].as_f64().unwrap() > 0.0,
            "baseline {b}"
        );
        let r = j["ratios"][b].as_f64().unwrap();
        let want =
            j["ours"]["iops"].as_f64().unwrap() / j["baselines"][b]["iops"].as_f64().unwrap();
        assert!((r - want).abs() < 1e-9 * want.max(1.0), "ratio {b}");
    }
    // What the journal did, beside the contract fields.
    assert!(
        j["journal"]["records"].as_u64().unwrap() > 0,
        "{}",
        j["journal"]
    );
    assert!(j["journal"]["records_per_batch"].as_f64().unwrap() >= 1.0);
    // The scratch files are gone afterwards.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn bench_ring_json_contract() {
    let o = hscm(&[
        "bench",
        "ring",
        "--chunks",
        "4k",
        "--qd",
        "1,4",
        "--seconds",
        "0.05",
        "--size",
        "1M",
        "--no-db-sweep",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["rows"].as_array().unwrap();
    let modes: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| (r["qd"].as_u64().unwrap(), r["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [
            (1, "adaptive"),
            (1, "in-place"),
            (4, "adaptive"),
            (4, "in-place"),
            (4, "async")
        ]
    );
    for r in rows {
        assert_eq!(r["chunk"], 4096);
        for k in [
            "protocol_mbps",
            "interface_mbps",
            "p50_us",
            "p99_us",
            "core_round_trip_ns",
        ] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k} in {r}");
        }
        let want =
            1.0 - r["protocol_mbps"].as_f64().unwrap() / r["interface_mbps"].as_f64().unwrap();
        assert!((r["overhead"].as_f64().unwrap() - want).abs() < 1e-9, "{r}");
        // Only QD1 in-place rows carry the cached-source figures.
        let cached = r["qd"] == 1 && r["mode"] == "in-place";
        for k in ["cached_read_ns", "cached_copy_ns"] {
            match cached {
                true => assert!(r[k].as_f64().unwrap() > 0.0, "{k} in {r}"),
                false => assert!(r.get(k).is_none(), "{k} in {r}"),
            }
        }
    }
    let uds = j["uds"].as_array().unwrap();
    assert_eq!(uds.len(), 2);
    for u in uds {
        assert!(u["p50_us"].as_f64().unwrap() > 0.0 && u["ops_per_s"].as_f64().unwrap() > 0.0);
    }
    let floor = j["core_round_trip_ns"].as_array().unwrap();
    assert_eq!(floor.len(), 2);
    assert!(floor.iter().all(|x| x.as_f64().unwrap() > 0.0));
}

#[test]
fn bench_restart_json_contract() {
    let dir = tempfile::tempdir().unwrap();
    let o = hscm(&[
        "bench",
        "restart",
        "--size",
        "16M",
        "--path",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sizes = j["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 1);
    assert_eq!(sizes[0]["bytes"], 16 << 20);
    for k in ["open_ms", "first_read_ms", "warm_s", "warm_mbps"] {
        assert!(sizes[0][k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(j["backend_seq_read_mbps"].as_f64().unwrap() > 0.0);
}

#[test]
fn reproduce_lists_its_targets_with_their_sources_without_running_anything() {
    let o = hscm(&["reproduce", "--list-targets", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let targets: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let targets = targets.as_array().unwrap();
    assert!(targets.len() >= 40, "{} targets", targets.len());
    for t in targets {
        for field in ["what", "comparison", "target", "unit", "source"] {
            assert!(t.get(field).is_some(), "{field} missing from {t}");
        }
        let source = &t["source"];
        for field in ["paper", "seed", "at", "says"] {
            assert!(source.get(field).is_some(), "{field} missing from {source}");
        }
    }
    assert!(targets
        .iter()
        .any(|t| t["source"]["seed"] == "001" && t["source"]["at"] == "Fig. 6a"));
    let o = hscm(&["reproduce", "--list-targets"]);
    assert!(
        text(&o).contains("| check | target | source |"),
        "{}",
        text(&o)
    );
}
