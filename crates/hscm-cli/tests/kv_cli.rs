//! `hscm kv`: the JSON contract of bench, check on a healthy and a damaged store, and
//! clear errors for bad arguments.

use crate::util;

use util::run as hscm;

/// `hscm kv bench ARGS --json --dir DIR`, which must succeed; its JSON.
fn bench_json(args: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let mut all = vec!["kv", "bench"];
    all.extend_from_slice(args);
    all.extend(["--json", "--dir", dir.to_str().unwrap()]);
    let out = hscm(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bench_json_has_the_contract_fields() {
    let dir = tempfile::tempdir().unwrap();
    let v = bench_json(
        &[
            "--mode",
            "sprint",
            "--workload",
            "a-t",
            "--records",
            "600",
            "--ops",
            "1200",
            "--warmup-ops",
            "300",
            "--threads",
            "2",
            "--primaries",
            "1",
        ],
        dir.path(),
    );
    let run = &v["runs"][0];
    for field in [
        "workload",
        "mode",
        "ops_per_s",
        "read_p99_us",
        "write_p99_us",
        "edp",
        "idle_device_reads",
        "primaries",
    ] {
        assert!(!run[field].is_null(), "missing {field}: {run}");
    }
    assert_eq!(run["workload"], "a-t");
    assert_eq!(run["mode"], "sprint");
    // A generated low-density workload pauses 50 µs; every read is accounted for.
    assert_eq!(run["gap_us"], 50);
    assert!(run["trace"].is_null());
    assert_eq!(
        run["reads"].as_u64().unwrap() + run["updates"].as_u64().unwrap(),
        1200
    );
    assert_eq!(run["primaries"], 1);
    assert_eq!(run["ops"], 1200);
    let e = &run["energy_j"];
    let (exec, equal) = (
        e["execution"].as_f64().unwrap(),
        e["equal_time"].as_f64().unwrap(),
    );
    // Four devices draw between 4 x idle and 4 x peak power.
    let secs = run["seconds"].as_f64().unwrap();
    assert!(
        exec >= 4.0 * 1.91 * secs * 0.99 && exec <= 4.0 * 3.64 * secs * 1.01,
        "{exec} J in {secs} s"
    );
    assert!(
        (equal - exec).abs() < 1e-6 * exec.max(1.0),
        "a lone run's equal time is its own"
    );
    assert!(run["energy_note"].as_str().unwrap().contains("not metered"));
    // The scratch store is removed afterwards.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn check_passes_a_healthy_store_and_names_damage() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    assert!(hscm(&["kv", "create", s, "--devices", "2"])
        .status
        .success());
    {
        let kv = hscm_kv::KvStore::open(&store, hscm_kv::KvOptions::default()).unwrap();
        for i in 0..20 {
            kv.put(format!("k{i}").as_bytes(), &[i as u8; 100]).unwrap();
        }
        kv.close().unwrap();
    }
    let out = hscm(&["kv", "check", s, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records: u64 = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["records"].as_u64().unwrap())
        .sum();
    assert_eq!(records, 20);

    let log = store.join("dev0/data.log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[30] ^= 0xff;
    std::fs::write(&log, bytes).unwrap();
    let out = hscm(&["kv", "check", s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dev0/data.log") && err.contains("corrupt record at byte 0"),
        "{err}"
    );
    // The check it is does not tell the user to run itself.
    assert!(!err.contains("run `hscm kv check`"), "{err}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = hscm(&[
        "kv",
        "bench",
        "--mode",
        "turbo",
        "--records",
        "10",
        "--ops",
        "10",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown mode \"turbo\""));
    let out = hscm(&[
        "kv",
        "bench",
        "--workload",
        "zz",
        "--records",
        "10",
        "--ops",
        "10",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown workload \"zz\""));
    let out = hscm(&[
        "kv",
        "bench",
        "--power",
        "/nonexistent.json",
        "--records",
        "10",
        "--ops",
        "10",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither a preset"));
    let dir = tempfile::tempdir().unwrap();
    let out = hscm(&["kv", "check", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is this an hscm kv store?"));
    for (flag, value) in [("--trial-rounds", "0"), ("--sync-piece", "lots")] {
        let out = hscm(&["kv", "bench", flag, value, "--records", "10"]);
        assert!(!out.status.success(), "{flag} {value} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains(value), "{err}");
    }
}

#[test]
fn bench_replays_a_recorded_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ops.txt");
    std::fs::write(
        &trace,
        "# reduced from YCSB's basic binding\nINSERT usertable fresh1 [ field0=abc ]\nREAD fresh1\nUPDATE fresh1 300\nDELETE fresh1\nREAD missing\n",
    )
    .unwrap();
    let v = bench_json(
        &[
            "--mode",
            "standard",
            "--records",
            "50",
            "--warmup-ops",
            "0",
            "--threads",
            "1",
            "--trace",
            trace.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(v["runs"][0]["ops"], 5);
    std::fs::write(&trace, "READ a\nSCAN b 10\n").unwrap();
    let out = hscm(&[
        "kv",
        "bench",
        "--records",
        "10",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ops.txt:2") && err.contains("SCAN"), "{err}");
}

#[test]
fn compare_repeats_interleave_and_pair_within_a_repetition() {
    let dir = tempfile::tempdir().unwrap();
    let out = hscm(&[
        "kv",
        "compare",
        "--workloads",
        "a",
        "--modes",
        "standard,sprint",
        "--repeat",
        "2",
        "--records",
        "400",
        "--ops",
        "800",
        "--warmup-ops",
        "200",
        "--threads",
        "2",
        "--primaries",
        "1",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let seen: Vec<(u64, &str)> = runs
        .iter()
        .map(|r| (r["rep"].as_u64().unwrap(), r["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            (0, "standard"),
            (0, "sprint"),
            (1, "standard"),
            (1, "sprint")
        ]
    );
    // Equal-time energy is set within a repetition: both runs of a repetition cover
    // the slower one's time.
    for rep in runs.chunks(2) {
        let longest = rep
            .iter()
            .map(|r| r["seconds"].as_f64().unwrap())
            .fold(0.0, f64::max);
        for r in rep {
            let t = r["equal_time_s"].as_f64().unwrap();
            assert!((t - longest).abs() < 1e-9, "{t} vs {longest}");
        }
    }

    // The text summary names the repetitions and gives a median per Sprint mode.
    let out = hscm(&[
        "kv",
        "compare",
        "--workloads",
        "b",
        "--modes",
        "standard,sprint",
        "--repeat",
        "2",
        "--records",
        "300",
        "--ops",
        "400",
        "--warmup-ops",
        "0",
        "--threads",
        "1",
        "--primaries",
        "1",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Medians over 2 repetition(s)"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("b") && l.contains("sprint") && l.ends_with('x')),
        "{text}"
    );
    assert!(
        !hscm(&["kv", "compare", "--repeat", "0"]).status.success(),
        "--repeat 0 is refused"
    );
}
