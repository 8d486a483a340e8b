"""Long calls release the GIL: Python threads run while a simulation does."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import hscm
import hscm.sim  # imported here, so that its import does not fall inside the call


def test_a_python_thread_runs_while_a_simulation_does(tmp_path: Path) -> None:
    # Behaviour, not speed: a thread records when it runs. Were the GIL held for the
    # native call, no Python code could run inside it, so no mark could fall in its
    # middle.
    trace = tmp_path / "refs.hscm.zst"
    hscm.trace.generate(trace, kind="zipf", requests=300_000, footprint="64M", seed=1)
    marks: list[float] = []
    running = threading.Event()
    stop = threading.Event()

    def mark() -> None:
        running.set()
        while not stop.is_set():
            marks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=mark)
    t.start()
    running.wait()
    start = time.perf_counter()
    hscm.sim.paging(trace, page_sizes=["1k", "4k", "16k", "64k"], memory="25%", raw=True)
    end = time.perf_counter()
    stop.set()
    t.join()
    middle = (start + 0.2 * (end - start), end - 0.2 * (end - start))
    assert end - start > 0.02, "the call must be long enough to tell"
    inside = [m for m in marks if middle[0] < m < middle[1]]
    assert inside, f"no Python ran during the {end - start:.3f} s simulation"


# Closing while another thread is inside a call: the call holds no lock across the
# GIL's release, so close() neither deadlocks nor pulls the engine from under the
# call; it waits for the call, and later calls raise. Run in a child process, so that
# a deadlock (the old behaviour, 5 of 5 tries) fails the test instead of hanging it.
_CLOSE_WHILE_CALLING = """
import sys, threading
import hscm

kind, path = sys.argv[1], sys.argv[2]
for attempt in range(5):
    if kind == "volume":
        p = f"{path}/v{attempt}.hscm"
        hscm.Volume.create(p, size=8 << 20)
        engine = hscm.Volume(p)
        call = lambda: engine.read(0, 4 << 20)
    else:
        p = f"{path}/kv{attempt}"
        hscm.KeyValueStore.create(p, devices=1)
        engine = hscm.KeyValueStore(p)
        engine.put(b"k", b"v" * 1000)
        call = lambda: engine.get(b"k")
    started = threading.Event()
    outcome = []

    def caller():
        started.set()
        try:
            while True:
                call()
        except hscm.HscmError as e:
            outcome.append(str(e))

    t = threading.Thread(target=caller)
    t.start()
    started.wait()
    engine.close()
    t.join()
    assert outcome and "closed" in outcome[0], outcome
print("ok")
"""


@pytest.mark.parametrize("kind", ["volume", "kv"])
def test_close_while_another_thread_calls_neither_deadlocks_nor_breaks(
    tmp_path: Path, kind: str
) -> None:
    r = subprocess.run(
        [sys.executable, "-c", _CLOSE_WHILE_CALLING, kind, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
