"""Parameter sweeps over the simulators, on local processes, Dask or Ray.

A spec (TOML) is a base configuration, axes (``[grid]``: every combination;
``[zip]``: lists walked together) and seeds; docs/python.md describes it. Each point
has a deterministic id (a hash of its configuration as written and the hscm version),
so a sweep that was killed resumes with the points it lacks, and the same spec gives
the same table on any executor.

Results: ``OUT/points/<id>.json`` as each point finishes (written atomically, so a
kill loses only points in flight), and ``OUT/results.parquet``: one row per result
row of every point, with the point's parameters (``param.*``), its id, seed, and
provenance (hscm version, git revision, spec hash, wall and CPU seconds, host); a
failing point is one row with its ``error`` and the sweep goes on.

>>> df = hscm.sweep.run("examples/warm_sweep.toml", executor="local")   # doctest: +SKIP

From the shell: ``hscm sweep SPEC.toml [--executor local|dask|ray] [--out DIR]``, or
``python -m hscm.sweep`` with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from . import _native

EXECUTORS = ("local", "dask", "ray")

# Columns that measure the run rather than the simulation: they differ between runs
# of the same point, everything else must not.
TIMING_COLUMNS = ("wall_s", "cpu_s", "host", "requests_per_s", "executor")


def load(spec: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads, expands and checks a spec without running anything: every point's
    parameters parse and every trace opens. Raises ValueError naming the spec's file
    and line. Returns {"name", "simulator", "spec_hash", "hscm_version", "points"}."""
    return json.loads(_native.sweep_load(os.fspath(spec)))


def run_point(simulator: str, params: dict[str, Any]) -> dict[str, Any]:
    """Runs one point; never raises for the simulation's own failure, which is
    returned as ``error`` (so one bad point does not stop a sweep)."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        rows = json.loads(_native.sim_rows(simulator, json.dumps(params)))
        error = None
    except Exception as e:  # noqa: BLE001 - any failure of a point is recorded
        rows, error = [], f"{type(e).__name__}: {e}"
    return {
        "rows": rows,
        "error": error,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "host": socket.gethostname(),
    }


# Executors: each takes (simulator, [points]) and yields (point, outcome) as points
# finish, in any order.
Submit = Callable[[str, list[dict[str, Any]]], Iterator[tuple[dict[str, Any], dict[str, Any]]]]


def _local(workers: int | None) -> Submit:
    def go(simulator: str, points: list[dict[str, Any]]):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        n = workers or os.cpu_count() or 1
        # A fresh interpreter per worker: forking a process that may hold native
        # threads is unsafe.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            futures: dict[Future[dict[str, Any]], dict[str, Any]] = {
                pool.submit(run_point, simulator, p["params"]): p for p in points
            }
            for f in as_completed(futures):
                yield futures[f], f.result()

    return go


def _dask(workers: int | None, scheduler: str | None) -> Submit:
    def go(simulator: str, points: list[dict[str, Any]]):
        from dask.distributed import Client, LocalCluster, as_completed

        cluster = None
        if scheduler:
            client = Client(scheduler)
        else:
            cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
            client = Client(cluster)
        try:
            futures = {
                client.submit(run_point, simulator, p["params"], pure=False, key=f"hscm-{p['id']}"): p
                for p in points
            }
            for f in as_completed(list(futures)):
                yield futures[f], f.result()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()

    return go


def _ray(workers: int | None, address: str | None) -> Submit:
    def go(simulator: str, points: list[dict[str, Any]]):
        import ray

        started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
            ray.init(**kwargs)
            started = True
        try:
            remote = ray.remote(num_cpus=1)(run_point)
            pending = {remote.remote(simulator, p["params"]): p for p in points}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            if started:
                ray.shutdown()

    return go


def _executor(name: str, workers: int | None, scheduler: str | None, address: str | None) -> Submit:
    """The executor, refused at once (before any output) when its package is missing."""
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        raise ValueError("a sweep writes Parquet, which needs pyarrow: pip install 'hscm[sweep]'")
    needs = {"dask": ("distributed", "hscm[dask]"), "ray": ("ray", "hscm[ray]")}
    if name in needs and importlib.util.find_spec(needs[name][0]) is None:
        raise ValueError(
            f"the {name} executor needs the {needs[name][0]} package: pip install '{needs[name][1]}'"
        )
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if name == "local":
        return _local(workers)
    if name == "dask":
        return _dask(workers, scheduler)
    if name == "ray":
        return _ray(workers, address)
    raise ValueError(f"unknown executor {name!r} (known: {', '.join(EXECUTORS)})")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="point", dynamic_ncols=True, file=sys.stderr)


def run(
    spec: str | os.PathLike[str],
    executor: str = "local",
    out: str | os.PathLike[str] | None = None,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    address: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
) -> Any:
    """Runs every point of ``spec`` that ``out`` does not hold yet and returns the
    whole table (a pandas DataFrame, also written to ``out/results.parquet``).

    ``executor``: "local" (``workers`` processes, default one per core), "dask" (a
    LocalCluster of ``workers`` processes, or the cluster at ``scheduler``), "ray"
    (a local Ray of ``workers`` CPUs, or the cluster at ``address``). Points that
    failed before are run again only with ``retry_failed``.
    """
    df, _ = _run(spec, executor, out, workers, scheduler, address, retry_failed, progress)
    return df


def _run(
    spec: str | os.PathLike[str],
    executor: str,
    out: str | os.PathLike[str] | None,
    workers: int | None,
    scheduler: str | None,
    address: str | None,
    retry_failed: bool,
    progress: bool,
) -> tuple[Any, dict[str, Any]]:
    """``run``, and its summary {out, points, ran, failed, rows}."""
    sweep = load(spec)
    submit = _executor(executor, workers, scheduler, address)
    out_dir = Path(out) if out is not None else Path(f"{sweep['name']}-sweep")
    points_dir = out_dir / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(out_dir / "sweep.json", json.dumps(sweep, indent=1))
    todo = []
    for p in sweep["points"]:
        f = points_dir / f"{p['id']}.json"
        if f.exists():
            if not retry_failed or json.loads(f.read_text()).get("error") is None:
                continue
        todo.append(p)
    done_before = len(sweep["points"]) - len(todo)
    if progress:
        print(
            f"sweep {sweep['name']}: {len(sweep['points'])} points, {done_before} already "
            f"in {out_dir}, {len(todo)} to run on {executor}",
            file=sys.stderr,
        )
    bar = _progress(len(todo), progress)
    failed = 0
    try:
        if todo:
            for point, outcome in submit(sweep["simulator"], todo):
                record = {"point": point, "executor": executor, **outcome}
                _write_atomic(points_dir / f"{point['id']}.json", json.dumps(record))
                failed += outcome["error"] is not None
                if bar is not None:
                    bar.update(1)
                    if failed:
                        bar.set_postfix(failed=failed)
    finally:
        if bar is not None:
            bar.close()
    df = table(out_dir, sweep)
    df.to_parquet(out_dir / ".results.parquet.tmp", index=False)
    os.replace(out_dir / ".results.parquet.tmp", out_dir / "results.parquet")
    summary = {
        "out": str(out_dir),
        "points": int(df["point_id"].nunique()),
        "ran": len(todo),
        "failed": int(df.drop_duplicates("point_id")["error"].notna().sum()),
        "rows": len(df),
    }
    if progress:
        print(
            f"sweep {sweep['name']}: {summary['rows']} rows from {summary['points']} points "
            f"({summary['failed']} failed) -> {out_dir / 'results.parquet'}",
            file=sys.stderr,
        )
    return df, summary


def table(out_dir: str | os.PathLike[str], sweep: dict[str, Any] | None = None) -> Any:
    """The results table of the points ``out_dir`` holds (of ``sweep``'s points, in
    its order, when given)."""
    import pandas as pd

    out_dir = Path(out_dir)
    if sweep is None:
        sweep = json.loads((out_dir / "sweep.json").read_text())
    revision = _native.git_revision()
    rows: list[dict[str, Any]] = []
    for p in sweep["points"]:
        f = out_dir / "points" / f"{p['id']}.json"
        if not f.exists():
            continue
        rec = json.loads(f.read_text())
        base: dict[str, Any] = {
            "point_id": p["id"],
            "point_index": p["index"],
            "seed": p["seed"],
            **{f"param.{k}": v for k, v in p["config"].items()},
            "error": rec["error"],
            "hscm_version": sweep["hscm_version"],
            "git_revision": revision,
            "spec_hash": sweep["spec_hash"],
            "executor": rec["executor"],
            "wall_s": rec["wall_s"],
            "cpu_s": rec["cpu_s"],
            "host": rec["host"],
        }
        for r in rec["rows"] or [{}]:
            rows.append({**base, **r})
    df = pd.DataFrame(rows)
    # One type per column for Parquet: lists and tables as JSON text; a column mixing
    # kinds (numbers and text, say `size = [100, "5%"]`) as text.
    for col in df.columns:
        values = [v for v in df[col] if v is not None and not (isinstance(v, float) and v != v)]
        kinds = {_kind(v) for v in values}
        if "json" in kinds:
            df[col] = [None if v is None else json.dumps(v) for v in df[col]]
        elif len(kinds) > 1:
            df[col] = [None if v is None else str(v) for v in df[col]]
    return df


def _kind(v: Any) -> str:
    if isinstance(v, (list, dict)):
        return "json"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return "text"


def comparable(df: Any) -> Any:
    """``df`` without its timing columns, in point order: two runs of one spec give
    equal frames."""
    keep = [c for c in df.columns if c not in TIMING_COLUMNS]
    sort = [c for c in ("point_id", "policy", "cache_size", "page_size", "latency_x") if c in keep]
    return df[keep].sort_values(sort, kind="stable").reset_index(drop=True)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hscm sweep",
        description="Run every point of a sweep spec (a base configuration, axes and "
        "seeds in TOML; see docs/python.md) and write OUT/results.parquet. A killed "
        "sweep resumes: points already in OUT are not run again.",
    )
    parser.add_argument("spec", help="the sweep spec (TOML)")
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="where points run: local processes, a Dask cluster, or Ray")
    parser.add_argument("--out", help="output directory [default: NAME-sweep]")
    parser.add_argument("--workers", type=int,
                        help="local processes, Dask LocalCluster workers or Ray CPUs [default: one per core]")
    parser.add_argument("--scheduler", help="Dask: address of an existing scheduler (tcp://host:8786)")
    parser.add_argument("--address", help="Ray: address of an existing cluster (host:6379 or auto)")
    parser.add_argument("--retry-failed", action="store_true", help="run points that failed before again")
    parser.add_argument("--check", action="store_true", help="check the spec and list its points; run nothing")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON summary {out, points, ran, failed, rows} instead of progress")
    a = parser.parse_args(list(argv) if argv is not None else None)
    try:
        if a.check:
            s = load(a.spec)
            print(json.dumps({"name": s["name"], "simulator": s["simulator"],
                              "points": [{"id": p["id"], **p["config"]} for p in s["points"]]}, indent=1))
            return 0
        _, summary = _run(a.spec, a.executor, a.out, a.workers, a.scheduler, a.address,
                          a.retry_failed, not a.json)
    except ValueError as e:
        print(f"hscm sweep: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
