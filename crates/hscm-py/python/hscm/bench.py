"""Benchmarks of the Python package, each against a baseline measured in the same run.

- ``threads``: two simulations in two Python threads at once against the same two one
  after the other in one thread. The native module releases the GIL, so on two cores
  the pair should take little more than one.
- ``sweep``: a sweep of points of at least a second on the local executor with one
  worker process per core, against the same sweep with one worker.

    python -m hscm.bench [--quick] [--out report/python/bench.json]

Prints a table, and with ``--out`` writes the figures as JSON (the report's ``python``
section reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import _native, sweep, trace


def _simulate(path: str, threshold: int) -> None:
    _native.sim_run(
        "memory", json.dumps({"trace": path, "policies": ["warm"], "warm_threshold": threshold})
    )


def bench_threads(path: str, rounds: int) -> dict[str, Any]:
    """Two simulations: one after the other in one thread, then in two threads."""
    seq, par = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        _simulate(path, 1)
        _simulate(path, 2)
        seq.append(time.perf_counter() - t)
        threads = [threading.Thread(target=_simulate, args=(path, k)) for k in (1, 2)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        par.append(time.perf_counter() - t)
    one, two = statistics.median(seq), statistics.median(par)
    return {
        "one_thread_s": one,
        "two_threads_s": two,
        "speedup": one / two,
        "rounds": rounds,
        "simulation_s": one / 2,
    }


def bench_sweep(path: str, points: int, workers: int, tmp: Path) -> dict[str, Any]:
    """The same sweep with one local worker, then with ``workers``."""
    spec = tmp / "bench.toml"
    thresholds = ", ".join(str(k + 1) for k in range(points))
    spec.write_text(
        f'simulator = "memory"\nname = "bench"\n[base]\ntrace = "{path}"\n'
        f'policies = ["warm"]\n[grid]\nwarm_threshold = [{thresholds}]\n'
    )
    times = {}
    for n in (1, workers):
        t = time.perf_counter()
        df = sweep.run(spec, "local", tmp / f"out-{n}", workers=n, progress=False)
        times[n] = time.perf_counter() - t
        if df["error"].notna().any():
            raise RuntimeError(f"a benchmark point failed: {df['error'].dropna().iloc[0]}")
        point_s = float(df["wall_s"].min())
    return {
        "points": points,
        "workers": workers,
        "one_worker_s": times[1],
        "workers_s": times[workers],
        "speedup": times[1] / times[workers],
        "shortest_point_s": point_s,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hscm.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a smaller trace and fewer points: a smoke test")
    p.add_argument("--out", help="write the figures as JSON here")
    a = p.parse_args(argv)
    cores = os.cpu_count() or 1
    requests = "1M" if a.quick else "5M"
    with tempfile.TemporaryDirectory(prefix="hscm-bench-") as d:
        tmp = Path(d)
        path = str(tmp / "mix.hscm.zst")
        trace.generate(path, kind="mix", requests=requests, footprint="256M", seed=1)
        threads = bench_threads(path, 1 if a.quick else 3)
        sweep_fig = bench_sweep(path, 4 if a.quick else 2 * max(cores, 2) * 2, max(cores, 2), tmp)
    result = {
        "quick": a.quick,
        "cores": cores,
        "trace": f"synthetic mix, {requests} references (hscm.trace.generate kind=mix seed=1)",
        "threads": threads,
        "sweep": sweep_fig,
    }
    print(f"two simulations: one thread {threads['one_thread_s']:.2f} s, two threads "
          f"{threads['two_threads_s']:.2f} s: {threads['speedup']:.2f}x (target >= 1.6x)")
    print(f"sweep of {sweep_fig['points']} points (shortest {sweep_fig['shortest_point_s']:.2f} s): "
          f"1 worker {sweep_fig['one_worker_s']:.2f} s, {sweep_fig['workers']} workers "
          f"{sweep_fig['workers_s']:.2f} s: {sweep_fig['speedup']:.2f}x (target >= 1.8x)")
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
