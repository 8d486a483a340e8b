//! The memory simulator's command-line contract: JSON fields scripts rely on, format
//! detection, and clear errors for bad input.

use crate::util;

use std::path::Path;

use util::{ok_json, run as hscm};

fn gen(dir: &Path, kind: &str) -> String {
    let p = dir.join(format!("{kind}.hscm.zst")).display().to_string();
    let out = hscm(&[
        "trace",
        "gen",
        "--kind",
        kind,
        "--requests",
        "20k",
        "--footprint",
        "16M",
        "-o",
        &p,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p
}

#[test]
fn compare_json_has_every_contract_field_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = gen(dir.path(), "hot-writes");
    let v = ok_json(&["sim", "memory", "compare", "--trace", &trace, "--json"]);
    assert_eq!(v["trace"], trace);
    assert!(v["config"]["dram_bytes"].as_u64().unwrap() == 1 << 30);
    let policies = v["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dram-only", "pcm-only", "static", "warm", "rapp"]);
    for p in policies {
        for f in ["cycles", "ipc", "edp", "migrations"] {
            assert!(p[f].is_number(), "{f} in {p}");
        }
        assert!(p["read_latency_ns"]["mean"].as_f64().unwrap() > 0.0);
        assert!(p["read_latency_ns"]["p99"].as_f64().unwrap() > 0.0);
        assert!(p["write_latency_ns"]["mean"].as_f64().unwrap() > 0.0);
        assert!(
            p["read_latency_ns"]["queue_mean"].is_number()
                && p["read_latency_ns"]["device_mean"].is_number()
        );
        assert!(p["energy_j"]["total"].as_f64().unwrap() > 0.0);
        for f in ["energy", "perf", "edp"] {
            assert!(p["norm"][f].as_f64().unwrap() > 0.0, "norm.{f} in {p}");
        }
    }
    assert_eq!(policies[0]["norm"]["energy"].as_f64(), Some(1.0));
    assert!(
        policies[3]["migrations"].as_u64().unwrap() > 0,
        "WARM migrates concentrated writes"
    );
}

#[test]
fn text_formats_are_detected_and_lackey_converts_from_a_start_address() {
    let dir = tempfile::tempdir().unwrap();
    let lackey = dir.path().join("prog.lackey");
    let mut text = String::from("==1== Lackey, an example Valgrind tool\n");
    // Start-up noise, then the "hot function" at 0x401000 touching 2 MiB.
    text.push_str("I  04000000,3\n L 1ffefff000,8\n");
    for i in 0..40_000u64 {
        text.push_str(&format!("I  {:08x},4\n", 0x401000 + (i % 16) * 4));
        text.push_str(&format!(
            " {} {:x},8\n",
            if i % 3 == 0 { "S" } else { "L" },
            0x10000000 + i * 64
        ));
    }
    std::fs::write(&lackey, text).unwrap();
    let out = dir.path().join("prog.hscm.zst");
    let r = ok_json(&[
        "trace",
        "convert",
        lackey.to_str().unwrap(),
        "--start-pc",
        "0x401000",
        "--instructions",
        "30000",
        "--post-cache",
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["skipped_references"], 2);
    assert_eq!(r["instructions"], 30_000);
    assert!(r["written"].as_u64().unwrap() > 1000, "{r}");
    let v = ok_json(&[
        "sim",
        "memory",
        "compare",
        "--trace",
        out.to_str().unwrap(),
        "--policies",
        "dram-only,warm",
        "--json",
    ]);
    assert_eq!(v["format"], "hscm");
    assert_eq!(v["policies"].as_array().unwrap().len(), 2);
    assert!(
        v["config"]["caches"].is_null(),
        "a post-cache trace skips the caches"
    );
    // The raw lackey text runs through the caches.
    let v = ok_json(&[
        "sim",
        "memory",
        "compare",
        "--trace",
        lackey.to_str().unwrap(),
        "--policies",
        "static",
        "--json",
    ]);
    assert_eq!(v["format"], "lackey");
    assert!(v["policies"][0]["cache_hit_rate"]["l1d"].is_number());
    for (name, body, fmt) in [
        ("r.trace", "LD 0x1000\nST 0x2040\n", "ramulator"),
        ("d.trace", "0x1000 READ 0\n0x2040 WRITE 20\n", "dramsim3"),
        (
            "n.trace",
            "NVMV1\n0 R 0x1000 00 0\n20 W 0x2040 00 00 0\n",
            "nvmain",
        ),
        ("s.stl", "0:\tread\t0x1000\n20:\twrite\t0x2040\n", "dramsys"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let v = ok_json(&[
            "sim",
            "memory",
            "compare",
            "--trace",
            p.to_str().unwrap(),
            "--policies",
            "dram-only",
            "--json",
        ]);
        assert_eq!(v["format"], fmt);
        assert_eq!(v["policies"][0]["references"], 2);
    }
}

#[test]
fn bad_input_gets_an_error_naming_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.trace");
    std::fs::write(&p, "LD 0x1000\nLD 0xZZ\n").unwrap();
    let out = hscm(&["sim", "memory", "compare", "--trace", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("bad.trace:2: bad hex address"), "{err}");
    std::fs::write(&p, "hello\n").unwrap();
    let err = String::from_utf8_lossy(
        &hscm(&["sim", "memory", "compare", "--trace", p.to_str().unwrap()]).stderr,
    )
    .to_string();
    assert!(err.contains("cannot tell the trace format"), "{err}");
    let err = String::from_utf8_lossy(
        &hscm(&["sim", "memory", "compare", "--trace", "/nonexistent/x"]).stderr,
    )
    .to_string();
    assert!(err.contains("/nonexistent/x"), "{err}");
    let trace = gen(dir.path(), "mix");
    for (args, want) in [
        (vec!["--policies", "lru"], "unknown policy"),
        (vec!["--format", "csv"], "unknown format"),
        (vec!["--dram", "ddr9"], "unknown memory preset"),
        (vec!["--mapping", "co-ro-ba-ra-ch"], "address mapping"),
        (vec!["--row", "3000"], "power of two"),
    ] {
        let mut a = vec!["sim", "memory", "compare", "--trace", trace.as_str()];
        a.extend(args);
        let out = hscm(&a);
        assert!(!out.status.success(), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{a:?}: {err}");
    }
    let out = hscm(&[
        "trace",
        "convert",
        &trace,
        "--post-cache",
        "-o",
        dir.path().join("x").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already a post-cache trace"));
}

#[test]
fn bench_memsim_json_has_its_contract_fields() {
    let v = ok_json(&["bench", "memsim", "--requests", "50k", "--json"]);
    assert_eq!(v["requests"], 50_000);
    for f in [
        "cpu_s",
        "requests_per_cpu_s",
        "peak_rss_mb",
        "warm_cpu_ratio",
        "decode_only_per_cpu_s",
    ] {
        assert!(v[f].as_f64().unwrap() >= 0.0, "{f}: {v}");
    }
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
}

#[test]
fn sim_cache_json_contract_and_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let t = util::request_trace(dir.path(), &["--one-time", "0.3"]);
    let one = ok_json(&[
        "sim",
        "cache",
        "--trace",
        t.to_str().unwrap(),
        "--policy",
        "ac-lru",
        "--size",
        "500",
        "--json",
    ]);
    // One shape for every call: an array of rows, here of one.
    assert_eq!(one.as_array().map(Vec::len), Some(1), "{one}");
    let v = &one[0];
    for f in [
        "trace",
        "policy",
        "cache_size",
        "requests",
        "miss_ratio",
        "byte_miss_ratio",
        "inserted",
        "bypassed",
        "requests_per_s",
    ] {
        assert!(!v[f].is_null(), "{f}: {v}");
    }
    assert_eq!(v["policy"], "ac-lru");
    assert_eq!(v["requests"], 20_000);
    assert!(
        v["bypassed"].as_u64().unwrap() > 5000,
        "one-time objects are bypassed"
    );
    assert_eq!(v["access_time"]["profile"], "scm");
    assert!(
        v["access_time"]["with_cache_s"].as_f64().unwrap() > 0.0
            && v["access_time"]["without_cache_s"].as_f64().unwrap() > 0.0
    );
    let rows = ok_json(&[
        "sim",
        "cache",
        "--trace",
        t.to_str().unwrap(),
        "--policy",
        "lru,clock,fifo,arc,s3fifo,sieve,belady",
        "--size",
        "5%,20%",
        "--json",
    ]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 14);
    let miss = |p: &str, i: usize| {
        rows.iter().filter(|r| r["policy"] == p).nth(i).unwrap()["miss_ratio"]
            .as_f64()
            .unwrap()
    };
    for p in ["lru", "clock", "fifo", "arc", "s3fifo", "sieve"] {
        assert!(
            miss("belady", 0) <= miss(p, 0) && miss("belady", 1) <= miss(p, 1),
            "{p}: Belady is the bound"
        );
        assert!(
            miss(p, 1) <= miss(p, 0) + 1e-9,
            "{p}: a bigger cache misses less here"
        );
    }
    for (args, want) in [
        (
            vec!["--size", "64MiB,100"],
            "mixes object counts and byte sizes",
        ),
        (vec!["--policy", "lfu"], "unknown policy"),
        (vec!["--profile", "tape"], "unknown storage profile"),
        (vec!["--size", "150%"], "percentage"),
    ] {
        let mut a = vec!["sim", "cache", "--trace", t.to_str().unwrap()];
        a.extend(args);
        let out = hscm(&a);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "1,2,3\n4,five,6\n").unwrap();
    let out = hscm(&[
        "sim",
        "cache",
        "--trace",
        bad.to_str().unwrap(),
        "--size",
        "10",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.csv:2: bad object id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sim_paging_rows_and_best_page_size() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/paging/djpeg.hscm.zst");
    let v = ok_json(&[
        "sim",
        "paging",
        "--trace",
        traces.to_str().unwrap(),
        "--page-sizes",
        "512,4k,64k",
        "--latency-x",
        "1,100",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        for f in [
            "page_size",
            "latency_x",
            "tlb_hit_rate",
            "fault_rate",
            "t_addr_ns",
            "t_data_ns",
            "t_total_ns",
        ] {
            assert!(r[f].is_number(), "{f}: {r}");
        }
        let sum = r["t_addr_ns"].as_f64().unwrap() + r["t_data_ns"].as_f64().unwrap();
        assert!((sum - r["t_total_ns"].as_f64().unwrap()).abs() < 1e-6);
    }
    assert_eq!(v["best"].as_array().unwrap().len(), 2);
    let out = hscm(&[
        "sim",
        "paging",
        "--trace",
        traces.to_str().unwrap(),
        "--page-sizes",
        "1000",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("powers of two"));
}

#[test]
fn bench_cache_json_has_its_fields() {
    let v = ok_json(&[
        "bench",
        "cache",
        "--requests",
        "50k",
        "--objects",
        "5k",
        "--json",
    ]);
    assert_eq!(v["requests"], 50_000);
    assert!(v["lru_requests_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 9);
    assert_eq!(v["runs"][8]["policy"], "lru (volume default)");
    assert!(v["volume_default_vs_no_cutoff"].as_f64().unwrap() > 0.0);
    assert!(v["lru_volume_default_requests_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert!(v["peak_rss_mb"].as_f64().unwrap() > 0.0);
}

#[test]
fn an_admission_filter_goes_in_front_of_any_eviction_policy() {
    let dir = tempfile::tempdir().unwrap();
    let t = util::request_trace(dir.path(), &["--one-time", "0.3"]);
    let t = t.to_str().unwrap();
    let rows = |policy: &str, admission: Option<&str>| {
        // Admission alone: no sequential cutoff (replay's placement turns a run of new
        // keys into a long "sequential" run; tests/tier_cli.rs covers that).
        let mut a = vec![
            "sim",
            "cache",
            "--trace",
            t,
            "--policy",
            policy,
            "--size",
            "500",
            "--sequential-cutoff",
            "0",
            "--json",
        ];
        if let Some(adm) = admission {
            a.extend(["--admission", adm]);
        }
        ok_json(&a).as_array().unwrap().clone()
    };
    let plain = rows("fifo,sieve", None);
    let seen = rows("fifo,sieve", Some("seen-before"));
    assert_eq!(seen[0]["policy"], "fifo+seen-before");
    assert_eq!(seen[1]["policy"], "sieve+seen-before");
    for (p, s) in plain.iter().zip(&seen) {
        assert_eq!(p["bypassed"], 0, "{p}");
        // Every one-time object (30% of requests) is bypassed, and the first
        // request of every other object.
        assert!(s["bypassed"].as_u64().unwrap() > 6000, "{s}");
    }
    // LRU behind second-miss is AC-LRU, decision for decision.
    let ac = rows("ac-lru", None);
    let lru_second = rows("lru", Some("second-miss"));
    assert_eq!(lru_second[0]["policy"], "ac-lru");
    for f in ["miss_ratio", "byte_miss_ratio", "inserted", "bypassed"] {
        assert_eq!(ac[0][f], lru_second[0][f], "{f}");
    }
    // The two filters differ: seen-before re-admits an evicted object at once.
    let lru_seen = rows("lru", Some("seen-before"));
    assert!(
        lru_seen[0]["inserted"].as_u64() > ac[0]["inserted"].as_u64(),
        "{lru_seen:?} {ac:?}"
    );
    for (policy, want) in [
        ("ac-lru", "has its own admission filter"),
        ("belady", "takes no admission filter"),
    ] {
        let o = hscm(&[
            "sim",
            "cache",
            "--trace",
            t,
            "--policy",
            policy,
            "--admission",
            "seen-before",
        ]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{policy}: {err}");
    }
    let o = hscm(&["sim", "cache", "--trace", t, "--admission", "bloom"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown admission filter"));
}

#[test]
fn bench_memsim_validate_prints_every_comparison_and_refuses_an_empty_run() {
    let v = ok_json(&["bench", "memsim-validate", "--requests", "20k", "--json"]);
    assert_eq!(v["requests"], 20_000);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    let comparisons = v["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 8, "{v}");
    for c in comparisons {
        for f in ["hscm", "reference", "difference", "band"] {
            assert!(c[f].as_f64().unwrap().is_finite(), "{f}: {c}");
        }
        assert!(c["within"].is_boolean(), "{c}");
    }
    assert!(v["mix_requests_per_cpu_s"].as_f64().unwrap() > 0.0);
    let o = hscm(&["bench", "memsim-validate", "--requests", "0"]);
    util::assert_clean_failure(&o, "memsim-validate --requests 0");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("at least one request"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn trace_anchor_writes_the_reference_generators_requests_and_refuses_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    let ds3 = dir.path().join("mix5m.ds3");
    let o = hscm(&[
        "trace",
        "anchor",
        "mix5m",
        "--requests",
        "12",
        "-o",
        ds3.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The first lines gen_trace.py writes to mix5m.ds3 (seed 42).
    let text = std::fs::read_to_string(&ds3).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12);
    assert_eq!(
        &lines[..4],
        &[
            "0xe400000 READ 0",
            "0x3300000 READ 1",
            "0x23300000 WRITE 2",
            "0xb20cfc0 READ 3"
        ]
    );
    // hscm reads back its own binary copy as a post-cache, cycle-stamped trace.
    let bin = dir.path().join("s.hscm.zst");
    let o = hscm(&[
        "trace",
        "anchor",
        "stream",
        "--requests",
        "1k",
        "--format",
        "hscm",
        "-o",
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = ok_json(&[
        "sim",
        "memory",
        "compare",
        "--trace",
        bin.to_str().unwrap(),
        "--dram",
        "ddr3-1600k",
        "--policies",
        "dram-only",
        "--json",
    ]);
    assert_eq!(v["policies"][0]["references"], 1000, "{v}");
    let o = hscm(&["trace", "anchor", "mix9", "-o", ds3.to_str().unwrap()]);
    util::assert_clean_failure(&o, "trace anchor mix9");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("mix5m_gap16"), "{err}");
    // The earlier file is untouched by the failed run.
    assert_eq!(std::fs::read_to_string(&ds3).unwrap(), text);
}

#[test]
fn ready_order_reaches_the_controller_and_changes_the_schedule_on_a_shared_bank() {
    let dir = tempfile::tempdir().unwrap();
    let ds3 = dir.path().join("mix.ds3");
    let o = hscm(&[
        "trace",
        "anchor",
        "mix5m",
        "--requests",
        "30k",
        "-o",
        ds3.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = |order: Option<&str>| {
        let mut args = vec![
            "sim",
            "memory",
            "compare",
            "--trace",
            ds3.to_str().unwrap(),
            "--format",
            "dramsim3",
            "--dram",
            "ddr3-1600k",
            "--dram-size",
            "4G",
            "--pcm-size",
            "0",
            "--placement",
            "identity",
            "--policies",
            "dram-only",
            "--json",
        ];
        if let Some(order) = order {
            args.extend(["--ready-order", order]);
        }
        ok_json(&args)
    };
    let default = run(None);
    let hits_first = run(Some("row-hits-first"));
    assert_eq!(default["config"]["controller"]["ready_order"], "oldest");
    assert_eq!(
        hits_first["config"]["controller"]["ready_order"],
        "row-hits-first"
    );
    let hit_rate =
        |v: &serde_json::Value| v["policies"][0]["row_hit_rate"]["dram"].as_f64().unwrap();
    assert!(
        hit_rate(&hits_first) > hit_rate(&default),
        "row hits first {} against oldest {}",
        hit_rate(&hits_first),
        hit_rate(&default)
    );
    let o = hscm(&[
        "sim",
        "memory",
        "compare",
        "--trace",
        ds3.to_str().unwrap(),
        "--ready-order",
        "newest",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("oldest, row-hits-first"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
