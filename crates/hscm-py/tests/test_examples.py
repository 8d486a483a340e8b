"""The examples run and produce their figures; the report's experiments run from
Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hscm
import hscm.experiments

from conftest import REPO

EXAMPLES = REPO / "examples"


@pytest.mark.parametrize(
    ("script", "args", "outputs"),
    [
        ("memory_energy.py", [], ["memory_energy.svg", "memory_energy.csv"]),
        ("cache_curves.py", ["--requests", "50k"], ["cache_curves.svg", "cache_curves.csv"]),
        ("paging_page_size.py", ["--trace", "{small}"], ["paging_page_size.svg"]),
    ],
)
def test_a_figure_example_writes_its_plot(tmp_path: Path, script: str, args: list[str], outputs: list[str]) -> None:
    if "{small}" in args:
        # The shipped paging traces take a minute in the tests' unoptimised build.
        small = tmp_path / "small.hscm.zst"
        hscm.trace.generate(small, kind="zipf", requests=100_000, footprint="16M", seed=2)
        args = [str(small) if a == "{small}" else a for a in args]
    subprocess.run([sys.executable, str(EXAMPLES / script), "--out", str(tmp_path), *args],
                   check=True, capture_output=True, text=True)
    for name in outputs:
        assert (tmp_path / name).stat().st_size > 0, name


def test_the_warm_sweep_example_runs_every_point(tmp_path: Path) -> None:
    out = tmp_path / "warm"
    subprocess.run([sys.executable, str(EXAMPLES / "warm_sweep.py"), "--out", str(out), "--workers", "2"],
                   check=True, capture_output=True, text=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points"] == 48 and summary["failed"] == 0
    assert len(summary["rows"]) == 48
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == 96  # DRAM-only and WARM per point
    assert (out / "warm_sweep.svg").stat().st_size > 0


def test_the_report_runs_from_python(tmp_path: Path) -> None:
    report = hscm.experiments.reproduce(tmp_path, only=["python"], quick=True)
    assert report["quick"] is True
    assert report["python"]["bench"] is None  # nothing measured into this directory
    assert (tmp_path / "report.md").exists()
    with pytest.raises(ValueError, match="unknown section 'disk'"):
        hscm.experiments.reproduce(tmp_path, only=["disk"])
    with pytest.raises(ValueError, match="unknown field `secs`"):
        hscm.experiments.reproduce(tmp_path, only=["python"], secs=3)
    # The program's own refusal comes back with its message.
    with pytest.raises(hscm.HscmError, match="restart-size"):
        hscm.experiments.reproduce(tmp_path, only=["python"], restart_size="lots")


def test_the_wheel_links_no_server_fuse_or_plotting_code() -> None:
    # The report runs in the hscm program; the module only links the simulators.
    native = Path(hscm._native.__file__).read_bytes()
    for crate in (b"hscm_nbd", b"hscm_ring", b"hscm_fuse", b"fuser", b"plotters", b"hscm_lab"):
        assert crate not in native, crate
