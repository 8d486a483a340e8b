//! `hscm volume create --ram`, `volume info` and `volume replay`: the tiered volume's
//! command-line contract, and its agreement with `hscm sim cache`.

use crate::util;

use std::io::Write;

use util::{ok_json, run as hscm};

/// 3,000 skewed requests of 1 or 2 blocks, then a 6 MiB scan of blocks never touched
/// before (longer than the default 4 MiB sequential cutoff), then 1,000 more.
fn msr_trace(path: &std::path::Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut x = 12345u64;
    for i in 0..4000u64 {
        if i == 3000 {
            for b in 0..1536u64 {
                writeln!(
                    f,
                    "{},h,0,Read,{},4096,0",
                    i * 10_000 + b,
                    (2000 + b) * 4096
                )
                .unwrap();
            }
        }
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 11) as f64 / (1u64 << 53) as f64;
        let block = (r * r * r * 2000.0) as u64;
        let kind = if x % 3 == 0 { "Write" } else { "Read" };
        writeln!(
            f,
            "{i},h,0,{kind},{},{},0",
            block * 4096,
            (1 + x % 2) * 4096
        )
        .unwrap();
    }
}

#[test]
fn a_replay_through_the_volume_hits_as_the_simulator_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("v.tier");
    let v = vol.to_str().unwrap();
    let o = hscm(&[
        "volume",
        "create",
        v,
        "--size",
        "16M",
        "--ram",
        "1M",
        "--policy",
        "arc",
        "--admission",
        "second-miss",
    ]);
    assert!(o.status.success(), "{}", util::stderr(&o));
    let info = ok_json(&["volume", "info", v, "--json"]);
    assert_eq!(info["kind"], "tiered");
    assert_eq!(info["tier"]["eviction"], "arc");
    assert_eq!(info["tier"]["admission"], "second-miss");
    assert_eq!(info["tier"]["ram"], 1 << 20);

    let trace = dir.path().join("t.msr.csv");
    msr_trace(&trace);
    let t = trace.to_str().unwrap();
    // Both with their defaults, the sequential cutoff included.
    let replay = ok_json(&["volume", "replay", v, "--trace", t, "--json"]);
    assert_eq!(replay["started_warm"], false, "{replay}");
    let sim = ok_json(&[
        "sim",
        "cache",
        "--trace",
        t,
        "--policy",
        "arc",
        "--admission",
        "second-miss",
        "--size",
        "1M",
        "--block",
        "4k",
        "--json",
    ]);
    assert_eq!(replay["requests"], sim[0]["requests"]);
    let dram = &replay["tiers"][0];
    assert_eq!(dram["tier"], "dram");
    assert_eq!(dram["hits"], sim[0]["hits"], "{replay}\n{sim}");
    let misses = sim[0]["requests"].as_u64().unwrap() - sim[0]["hits"].as_u64().unwrap();
    assert_eq!(dram["misses"].as_u64().unwrap(), misses);
    assert!(dram["bypassed_sequential"].as_u64().unwrap() > 0, "{dram}");
    assert_eq!(dram["bypassed_sequential"], sim[0]["bypassed_sequential"]);
    assert_eq!(sim[0]["sequential_cutoff"], 4 << 20);

    // The replay closed the volume cleanly: its counters are saved, and a second replay
    // adds to the lifetime ones.
    let stats = ok_json(&["volume", "stats", v, "--json"]);
    let saved = &stats["saved"];
    assert_eq!(saved["state"], "closed", "{stats}");
    assert_eq!(saved["session"]["requests"], replay["requests"]);
    assert_eq!(saved["session"]["tiers"][0]["hits"], dram["hits"]);
    assert_eq!(saved["dirty_bytes"], 0);
    // The second replay starts with what the first left in DRAM, and says so.
    let second = ok_json(&["volume", "replay", v, "--trace", t, "--json"]);
    assert_eq!(second["started_warm"], true, "{second}");
    assert!(second["cached_at_start_bytes"][0].as_u64().unwrap() > 0);
    let again = ok_json(&["volume", "stats", v, "--json"]);
    assert_eq!(
        again["saved"]["lifetime"]["requests"].as_u64().unwrap(),
        2 * replay["requests"].as_u64().unwrap()
    );
    let text = util::text(&hscm(&["volume", "stats", v]));
    assert!(text.contains("lifetime"), "{text}");
}

#[test]
fn tiered_volume_bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("v.tier");
    let v = v.to_str().unwrap();
    for (args, says) in [
        (vec!["--ram", "1M", "--policy", "belady"], "online policy"),
        (
            vec![
                "--ram",
                "1M",
                "--policy",
                "ac-lru",
                "--admission",
                "seen-before",
            ],
            "own admission filter",
        ),
        (vec!["--ram", "5000"], "multiple of the 4096-byte block"),
        (vec!["--ram", "1M", "--block", "2M"], "4 KiB to 1 MiB"),
        (vec!["--block", "8k"], "--ram"),
        (vec!["--ram", "1M", "--admission", "maybe"], "or always"),
    ] {
        let mut all = vec!["volume", "create", v, "--size", "16M"];
        all.extend(args.iter());
        let o = hscm(&all);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            util::stderr(&o).contains(says),
            "{args:?}: {}",
            util::stderr(&o)
        );
        assert!(!std::path::Path::new(v).exists(), "{args:?} left a file");
    }
    // Stats of something that is not a tiered volume, or of a fresh one.
    let o = hscm(&["volume", "stats", "/etc/hostname"]);
    assert!(!o.status.success());
    assert!(
        util::stderr(&o).contains("not a tiered volume"),
        "{}",
        util::stderr(&o)
    );
    // A replay onto a volume too small for the trace's blocks says so.
    let o = hscm(&["volume", "create", v, "--size", "64k", "--ram", "16k"]);
    assert!(o.status.success(), "{}", util::stderr(&o));
    let fresh = ok_json(&["volume", "stats", v, "--json"]);
    assert!(fresh["saved"].is_null(), "{fresh}");
    let trace = dir.path().join("t.msr.csv");
    msr_trace(&trace);
    let o = hscm(&["volume", "replay", v, "--trace", trace.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        util::stderr(&o).contains("larger volume"),
        "{}",
        util::stderr(&o)
    );
}

#[test]
fn bench_tier_json_has_its_contract_fields() {
    let v = ok_json(&[
        "bench",
        "tier",
        "--recovery-blocks",
        "2000",
        "--seconds",
        "0.1",
        "--json",
    ]);
    for f in [
        "hit_read_ns",
        "flat_read_ns",
        "hit_over_flat",
        "hot_kept_with_cutoff",
        "hot_kept_without_cutoff",
        "steady_hit_ratio",
        "restart_hit_ratio",
        "cold_hit_ratio",
        "restart_over_steady",
        "open_s_per_million_blocks",
        "recovery_s_per_million_blocks",
    ] {
        assert!(v[f].as_f64().unwrap() >= 0.0, "{f} in {v}");
    }
    assert_eq!(v["hit_costs"].as_array().unwrap().len(), 2);
    let scaling = &v["hit_scaling"];
    assert_eq!(scaling["threads"], 4);
    for f in [
        "hit_scaling",
        "flat_scaling",
        "hit_scaling_vs_bound",
        "hit_vs_flat_one_thread",
        "hit_vs_flat_threads",
    ] {
        assert!(scaling[f].as_f64().unwrap() > 0.0, "{f} in {scaling}");
    }
    let wb = &v["writeback"];
    assert_eq!(wb["writeback_bytes"], 32 << 20);
    // The 32 MiB, and the hot blocks the idle write rate was measured on.
    assert!(
        wb["written_back_blocks"].as_u64().unwrap() >= 32 << 20 >> 12,
        "{wb}"
    );
    for f in ["hit_keep", "write_keep", "writeback_s"] {
        assert!(wb[f].as_f64().unwrap() > 0.0, "{f} in {wb}");
    }
    assert_eq!(v["recovery_blocks"], 2000);
    let shares = v["shares"].as_array().unwrap();
    assert_eq!(shares.len(), 10, "{v}");
    for r in shares {
        assert!(r["ops_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    // The cutoff keeps the hot set through the scan; without it the scan washes it out.
    assert!(v["hot_kept_with_cutoff"].as_f64().unwrap() > 0.9, "{v}");
    assert!(v["hot_kept_without_cutoff"].as_f64().unwrap() < 0.5, "{v}");
    assert!(
        v["restart_hit_ratio"].as_f64().unwrap() > v["cold_hit_ratio"].as_f64().unwrap(),
        "{v}"
    );
}

#[test]
fn a_malformed_trace_is_refused_with_its_line_and_the_volume_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("v.tier");
    let v = v.to_str().unwrap();
    let o = hscm(&["volume", "create", v, "--size", "1M", "--ram", "64k"]);
    assert!(o.status.success(), "{}", util::stderr(&o));
    // Data that must survive the failed replay, written through a good one.
    let good = dir.path().join("good.msr.csv");
    std::fs::write(&good, "0,h,0,Write,0,4096,0\n1,h,0,Read,4096,4096,0\n").unwrap();
    ok_json(&[
        "volume",
        "replay",
        v,
        "--trace",
        good.to_str().unwrap(),
        "--json",
    ]);
    let before = std::fs::read(v).unwrap();
    let bad = dir.path().join("bad.msr.csv");
    std::fs::write(&bad, "0,h,0,Read,0,4096,0\n1,h,0,Erase,4096,4096,0\n").unwrap();
    let o = hscm(&[
        "volume",
        "replay",
        v,
        "--trace",
        bad.to_str().unwrap(),
        "--format",
        "msr",
    ]);
    assert!(!o.status.success());
    let err = util::stderr(&o);
    assert!(err.contains("bad.msr.csv:2"), "{err}");
    assert!(err.contains("Erase"), "{err}");
    let data = |img: &[u8]| img[4096..4096 + (1 << 20)].to_vec();
    assert!(
        data(&std::fs::read(v).unwrap()) == data(&before),
        "the data changed"
    );
}

#[test]
fn a_volume_with_a_fast_tier_is_created_replayed_and_reports_both_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("v.tier");
    let v = vol.to_str().unwrap();
    let o = hscm(&[
        "volume",
        "create",
        v,
        "--size",
        "16M",
        "--ram",
        "256K",
        "--fast-tier",
        "v.fast",
        "--fast-size",
        "2M",
        "--fast-policy",
        "s3fifo",
        "--fast-admission",
        "second-miss",
    ]);
    assert!(o.status.success(), "{}", util::stderr(&o));
    assert!(
        dir.path().join("v.fast").exists(),
        "the fast tier sits beside the volume"
    );
    let info = ok_json(&["volume", "info", v, "--json"]);
    assert_eq!(info["tier"]["fast"]["mode"], "write-back");
    assert_eq!(info["tier"]["fast"]["eviction"], "s3fifo");
    assert_eq!(info["tier"]["fast"]["admission"], "second-miss");
    assert_eq!(info["tier"]["fast"]["size"], 2 << 20);
    assert!(info["fast_tier_path"].as_str().unwrap().ends_with("v.fast"));

    let trace = dir.path().join("t.msr.csv");
    msr_trace(&trace);
    let r = ok_json(&[
        "volume",
        "replay",
        v,
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]);
    let tiers = r["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 2, "{r}");
    assert_eq!(tiers[1]["tier"], "fast");
    let fast_lookups = tiers[1]["hits"].as_u64().unwrap() + tiers[1]["misses"].as_u64().unwrap();
    // Reads that miss DRAM look in the fast tier; every write lands there (write-back).
    assert_eq!(
        fast_lookups,
        tiers[0]["read_misses"].as_u64().unwrap() + r["writes"].as_u64().unwrap(),
        "{r}"
    );
    assert!(tiers[1]["hits"].as_u64().unwrap() > 0, "{r}");
    let stats = ok_json(&["volume", "stats", v, "--json"]);
    assert_eq!(stats["saved"]["mode"], "write-back");
    assert_eq!(stats["saved"]["state"], "closed");
    assert!(
        stats["saved"]["session"]["tiers"][1]["promotions"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn fast_tier_flags_without_their_companions_are_refused_with_the_flag_named() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("v.tier");
    let v = v.to_str().unwrap();
    for (args, expect) in [
        (vec!["--ram", "1M", "--fast-tier", "f"], "--fast-size"),
        (vec!["--fast-tier", "f", "--fast-size", "1M"], "--ram"),
        (vec!["--ram", "1M", "--fast-size", "1M"], "--fast-tier"),
        (
            vec![
                "--ram",
                "1M",
                "--fast-tier",
                "f",
                "--fast-size",
                "1M",
                "--write-mode",
                "later",
            ],
            "write-through or write-back",
        ),
        (
            vec!["--ram", "1M", "--fast-tier", "f", "--fast-size", "5000"],
            "fast tier 5000",
        ),
    ] {
        let mut all = vec!["volume", "create", v, "--size", "16M"];
        all.extend(args.iter().copied());
        let o = hscm(&all);
        assert!(!o.status.success(), "{all:?}");
        let err = util::stderr(&o);
        assert!(err.contains(expect), "{all:?}: {err}");
    }
}
