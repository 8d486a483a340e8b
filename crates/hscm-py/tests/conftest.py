"""Shared fixtures: the repository, the `hscm` binary the CLI side of each comparison
runs, and small traces."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import hscm

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO / "traces"


@pytest.fixture(scope="session")
def hscm_bin() -> Path:
    """The command-line binary (HSCM_BIN, else target/debug/hscm, as scripts/test.sh
    builds it)."""
    path = Path(os.environ.get("HSCM_BIN", REPO / "target" / "debug" / "hscm"))
    if not path.exists():
        pytest.fail(f"{path} does not exist: build it with `cargo build -p hscm-cli` or set HSCM_BIN")
    return path


def run_cli(hscm_bin: Path, *args: str) -> str:
    return subprocess.run(
        [str(hscm_bin), *args], check=True, capture_output=True, text=True, cwd=REPO
    ).stdout


@pytest.fixture(scope="session")
def request_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 20,000-request Zipf trace with one-time objects and a scan."""
    path = tmp_path_factory.mktemp("traces") / "zipf.oracleGeneral.zst"
    n = hscm.trace.generate_requests(
        path, requests=20000, objects=2000, alpha=0.9, one_time=0.1, scan=0.1, seed=3
    )
    assert n == 20000
    return path
