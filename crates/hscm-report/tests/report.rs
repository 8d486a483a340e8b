//! The report as a library call: a section runs, renders and checks without the binary.

use std::path::Path;

use hscm_report::{self as report, ReproduceParams, SectionName};
use serde_json::Value;

#[test]
fn the_quick_memory_section_writes_its_tables_plots_and_sourced_checks() {
    let dir = tempfile::tempdir().unwrap();
    let params = ReproduceParams {
        out: dir.path().to_path_buf(),
        quick: true,
        only: vec![SectionName::Memsim],
        traces: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces"),
        ..ReproduceParams::default()
    };
    report::reproduce(&params).unwrap();

    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## Hybrid DRAM-PCM main memory"));
    assert!(
        md.contains("| energy vs DRAM-only (Fig. 8) | -46.2% |"),
        "shipped traces ran"
    );
    assert!(
        !md.contains("## Durable hybrid RAM volume"),
        "only the chosen section"
    );
    assert!(
        md.contains("HSCM/WARM, Fig. 8"),
        "the targets table names the paper and figure"
    );

    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert!(v["memsim"]["traces"].as_array().unwrap().len() >= 3);
    let checks = v["memsim"]["checks"].as_array().unwrap();
    assert!(checks.len() >= 3);
    for c in checks {
        for field in [
            "what",
            "ours",
            "target",
            "comparison",
            "unit",
            "passed",
            "trace",
        ] {
            assert!(c.get(field).is_some(), "{field} missing from {c}");
        }
        assert!(c["source"]["paper"].is_string(), "no source in {c}");
    }
    for f in ["memsim_energy.svg", "memsim_perf.svg", "memsim_edp.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(svg.len() > 1000, "{f}");
        assert!(
            svg.contains("paper: WARM"),
            "{f} draws the paper's value beside ours"
        );
    }
}
