"""Sweeps: the same table on every executor, resuming after a kill, failures recorded,
bad specs refused before anything runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import hscm
import hscm.sweep

from conftest import REPO, TRACES

POLICIES = ["lru", "fifo", "clock", "arc", "s3fifo"]


def hundred_point_spec(tmp_path: Path, trace: Path) -> Path:
    spec = tmp_path / "hundred.toml"
    sizes = ", ".join(str(20 * (i + 1)) for i in range(20))
    spec.write_text(
        f'simulator = "cache"\nname = "hundred"\n[base]\ntrace = "{trace}"\nobjects = true\n'
        f'[grid]\npolicy = {json.dumps(POLICIES)}\nsize = [{sizes}]\n'
    )
    return spec


def test_a_hundred_point_spec_gives_one_table_on_every_executor(tmp_path: Path, request_trace: Path) -> None:
    spec = hundred_point_spec(tmp_path, request_trace)
    tables = {}
    for executor in ("local", "dask", "ray"):
        df = hscm.sweep.run(spec, executor, tmp_path / executor, workers=2, progress=False)
        assert df["point_id"].nunique() == 100 and len(df) == 100
        assert df["error"].isna().all()
        assert (df["executor"] == executor).all()
        on_disk = pd.read_parquet(tmp_path / executor / "results.parquet")
        assert len(on_disk) == 100
        tables[executor] = hscm.sweep.comparable(df)
    pd.testing.assert_frame_equal(tables["local"], tables["dask"])
    pd.testing.assert_frame_equal(tables["local"], tables["ray"])
    # And the numbers are the simulator's: a point against a direct call.
    t = tables["local"]
    row = t[(t["param.policy"] == "arc") & (t["param.size"] == 200)].iloc[0]
    direct = hscm.sim.cache(request_trace, policy="arc", size=200, objects=True, raw=True)[0]
    assert row["miss_ratio"] == direct["miss_ratio"]
    # Provenance.
    assert set(t["hscm_version"]) == {hscm.__version__}
    assert set(t["git_revision"]) == {hscm.git_revision()}
    assert t["spec_hash"].str.len().eq(64).all()


def test_a_killed_sweep_resumes_with_only_the_missing_points(tmp_path: Path, hscm_bin: Path) -> None:
    spec = tmp_path / "slow.toml"
    spec.write_text(
        'simulator = "memory"\nname = "slow"\n[base]\n'
        f'trace = "{TRACES / "h264dec.hscm.zst"}"\npolicies = ["warm"]\n'
        '[grid]\nwarm_threshold = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n'
    )
    out = tmp_path / "out"
    env = {**os.environ, "HSCM_PYTHON": sys.executable}
    cmd = [str(hscm_bin), "sweep", str(spec), "--out", str(out), "--workers", "1", "--json"]
    child = subprocess.Popen(cmd, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    points = out / "points"
    while time.monotonic() < deadline and len(list(points.glob("*.json"))) < 3:
        assert child.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    before = {f.name: f.stat().st_mtime_ns for f in points.glob("*.json")}
    assert 3 <= len(before) < 12, f"{len(before)} points finished before the kill"
    assert not (out / "results.parquet").exists()
    r = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    summary = json.loads(r.stdout)
    assert summary["points"] == 12
    assert summary["ran"] == 12 - len(before), summary
    for name, mtime in before.items():
        assert (points / name).stat().st_mtime_ns == mtime, f"{name} ran again"
    df = pd.read_parquet(out / "results.parquet")
    assert len(df) == 12 and df["point_id"].is_unique
    assert sorted(df["param.warm_threshold"]) == list(range(1, 13))


def test_a_failing_point_is_recorded_and_the_rest_go_on(tmp_path: Path, request_trace: Path) -> None:
    spec = tmp_path / "onepass.toml"
    # One-pass curves exist for LRU only: the ARC point fails when it runs.
    spec.write_text(
        f'simulator = "cache"\n[base]\ntrace = "{request_trace}"\none_pass = true\n'
        'size = ["1%", "10%"]\n[grid]\npolicy = ["lru", "arc"]\n'
    )
    df = hscm.sweep.run(spec, "local", tmp_path / "o", workers=2, progress=False)
    lru, arc = df[df["param.policy"] == "lru"], df[df["param.policy"] == "arc"]
    assert len(lru) == 2 and lru["error"].isna().all()
    assert len(arc) == 1 and "one-pass works for --policy lru only" in arc["error"].iloc[0]
    # A failed point stays recorded; it runs again only when asked.
    again = hscm.sweep.run(spec, "local", tmp_path / "o", workers=2, progress=False)
    assert len(again) == 3


def test_an_axis_mixing_numbers_and_text_is_written_as_text(tmp_path: Path, request_trace: Path) -> None:
    spec = tmp_path / "mixed.toml"
    spec.write_text(
        f'simulator = "cache"\n[base]\ntrace = "{request_trace}"\nobjects = true\n'
        '[grid]\nsize = [100, "5%"]\n'
    )
    hscm.sweep.run(spec, "local", tmp_path / "o", workers=1, progress=False)
    df = pd.read_parquet(tmp_path / "o" / "results.parquet")
    assert sorted(df["param.size"]) == ["100", "5%"]
    assert df["error"].isna().all()


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ('[base]\ntrace = "{trace}"\nsizes = ["1%"]\n', 4, "parameter sizes: unknown parameter"),
        ('[base]\ntrace = "{trace}"\nblock = "huge"\n', 4, "parameter block: invalid value"),
        ('[base]\ntrace = "{trace}"\n[grid]\npolicy = []\n', 5, "axis policy is empty"),
        ('[base]\ntrace = "/no/such/trace.zst"\n', 3, "/no/such/trace.zst"),
        ('[base]\ntrace = "{trace}"\n[grid]\nobjects = [true, 3]\n', 5, "parameter objects: expected true or false"),
    ],
)
def test_a_bad_spec_is_refused_by_line_before_any_point_runs(
    tmp_path: Path, request_trace: Path, hscm_bin: Path, body: str, line: int, needle: str
) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text('simulator = "cache"\n' + body.replace("{trace}", str(request_trace)))
    with pytest.raises(ValueError, match=f"bad.toml:{line}: .*{needle}"):
        hscm.sweep.run(spec, "local", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    r = subprocess.run([str(hscm_bin), "sweep", str(spec), "--out", str(tmp_path / "out2")],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode != 0
    assert f"bad.toml:{line}:" in r.stderr and needle in r.stderr, r.stderr
    assert not (tmp_path / "out2").exists()


def test_a_run_that_cannot_start_is_refused_before_it_writes(tmp_path: Path, request_trace: Path, hscm_bin: Path) -> None:
    spec = hundred_point_spec(tmp_path, request_trace)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        hscm.sweep.run(spec, "local", tmp_path / "out", workers=0, progress=False)
    with pytest.raises(ValueError, match="unknown executor 'slurm'"):
        hscm.sweep.run(spec, "slurm", tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    # The command says what it needs when its Python lacks the package.
    r = subprocess.run([str(hscm_bin), "sweep", str(spec), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env={**os.environ, "HSCM_PYTHON": "false"})
    assert r.returncode != 0
    assert "cannot import the hscm Python package" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_sweep_reaches_an_existing_dask_cluster_by_its_scheduler_address(tmp_path: Path, request_trace: Path) -> None:
    from dask.distributed import LocalCluster

    spec = tmp_path / "small.toml"
    spec.write_text(
        f'simulator = "cache"\n[base]\ntrace = "{request_trace}"\nobjects = true\n'
        '[grid]\npolicy = ["lru", "sieve"]\nsize = [50, 500]\n'
    )
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        df = hscm.sweep.run(spec, "dask", tmp_path / "remote", scheduler=cluster.scheduler_address,
                            progress=False)
        # The cluster outlives the sweep: it belongs to whoever started it.
        assert cluster.status.name == "running"
    local = hscm.sweep.run(spec, "local", tmp_path / "local", workers=2, progress=False)
    pd.testing.assert_frame_equal(hscm.sweep.comparable(df), hscm.sweep.comparable(local))


def test_the_summary_counts_what_ran_with_the_default_output_directory(tmp_path: Path, request_trace: Path) -> None:
    spec = tmp_path / "named.toml"
    spec.write_text(
        f'simulator = "cache"\nname = "named"\n[base]\ntrace = "{request_trace}"\nobjects = true\n'
        '[grid]\nsize = [10, 100]\n'
    )
    def summary() -> dict:
        r = subprocess.run([sys.executable, "-m", "hscm.sweep", str(spec), "--workers", "1", "--json"],
                           check=True, capture_output=True, text=True, cwd=tmp_path)
        return json.loads(r.stdout)
    first = summary()
    assert (first["out"], first["points"], first["ran"], first["failed"]) == ("named-sweep", 2, 2, 0)
    assert (tmp_path / "named-sweep" / "results.parquet").exists()
    assert summary()["ran"] == 0
