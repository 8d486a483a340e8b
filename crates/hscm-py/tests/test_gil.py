"""Long calls release the GIL: Python threads run while a simulation does."""

from __future__ import annotations

import threading
import time
from pathlib import Path

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
