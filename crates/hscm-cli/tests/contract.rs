//! One CLI contract across volume kinds: every command recognises every kind (or
//! refuses it by name), one JSON schema per command, failures in JSON whenever
//! `--json` was asked (usage errors too), and format errors that name the format.

use crate::util;

use util::{run, text, tiered_volume};

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

#[test]
fn info_and_check_speak_one_schema_for_flat_and_tiered_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat.hscm");
    assert!(
        run(&["volume", "create", flat.to_str().unwrap(), "--size", "16M"])
            .status
            .success()
    );
    let tiered = tiered_volume(dir.path(), "64M", "16M");
    for (path, kind) in [(&flat, "flat"), (&tiered, "tiered")] {
        for cmd in ["info", "check"] {
            let o = run(&["volume", cmd, path.to_str().unwrap(), "--json"]);
            assert!(o.status.success(), "{cmd} {kind}: {}", text(&o));
            let v = json(&o);
            assert_eq!(v["kind"], kind, "{cmd}: {v}");
            assert_eq!(v["ok"], true, "{cmd}: {v}");
            assert_eq!(v["path"], path.to_str().unwrap(), "{cmd}: {v}");
            assert!(v["volume_size"].as_u64().unwrap() > 0, "{cmd}: {v}");
            assert!(v["durability"].is_string(), "{cmd}: {v}");
        }
    }
    let o = run(&["volume", "check", tiered.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ok (tiered volume"), "{}", text(&o));
}

#[test]
fn usage_errors_answer_in_json_when_json_was_asked() {
    let o = run(&["volume", "info", "--json", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    let v = json(&o);
    assert_eq!(v["ok"], false);
    assert_eq!(v["usage"], true);
    assert!(
        v["error"].as_str().unwrap().contains("--no-such-flag"),
        "{v}"
    );
    // Without --json: text only.
    let o = run(&["volume", "info", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
}

#[test]
fn a_dram_tier_larger_than_the_volume_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("t.hscm");
    let o = run(&[
        "volume",
        "create",
        v.to_str().unwrap(),
        "--size",
        "16M",
        "--ram",
        "32M",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--ram 32 MiB is larger than --size 16 MiB"),
        "{}",
        text(&o)
    );
    assert!(!v.exists(), "nothing created");
}

#[test]
fn a_binary_trace_read_as_a_text_format_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let t = tiered_volume(dir.path(), "64M", "16M");
    let trace = dir.path().join("binary.trace");
    std::fs::write(&trace, [0xffu8, 0xfe, 0x00, 0x80, 0x81, 0x0a].repeat(100)).unwrap();
    let o = run(&[
        "volume",
        "replay",
        t.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "msr",
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("not text") && t.contains("msr"), "{t}");
    assert!(!t.contains("stream did not contain valid UTF-8"), "{t}");
}
