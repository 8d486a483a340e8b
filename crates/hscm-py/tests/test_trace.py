"""Traces as numpy arrays: whole, streamed, generated and converted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hscm

from conftest import TRACES


def test_a_memory_trace_reads_into_columns_and_streams_in_chunks() -> None:
    whole = hscm.trace.read(TRACES / "fft.hscm.zst")
    assert set(whole) == {"addr", "kind", "size", "delta"}
    assert whole["addr"].dtype == np.uint64 and whole["kind"].dtype == np.uint8
    assert len(whole["addr"]) == 21327  # traces/MANIFEST.md
    # The shipped traces are post-cache: reads and writes of 64-byte lines.
    assert set(np.unique(whole["kind"])) <= {0, 1}
    # Instructions between references: all 10M but those after the last reference.
    assert 9_900_000 < whole["delta"].sum() <= 10_000_000
    # A chunk size far beyond the trace is a bound, not an allocation.
    assert len(next(hscm.trace.chunks(TRACES / "fft.hscm.zst", chunk=1 << 60))["addr"]) == 21327
    parts = list(hscm.trace.chunks(TRACES / "fft.hscm.zst", chunk=5000))
    assert [len(p["addr"]) for p in parts] == [5000] * 4 + [1327]
    assert np.array_equal(np.concatenate([p["addr"] for p in parts]), whole["addr"])


def test_a_request_trace_reads_with_its_next_use(request_trace: Path) -> None:
    r = hscm.trace.read_requests(request_trace)
    assert len(r["key"]) == 20000
    assert r["write"].dtype == bool
    # oracleGeneral carries each request's next use: the index of the same key, or -1.
    nxt = r["next"]
    has_next = nxt >= 0
    assert has_next.any() and (~has_next).any()
    assert np.array_equal(r["key"][nxt[has_next]], r["key"][has_next])


def test_generated_traces_are_reproducible(tmp_path: Path) -> None:
    a, b = tmp_path / "a.hscm.zst", tmp_path / "b.hscm.zst"
    assert hscm.trace.generate(a, kind="hot-writes", requests=5000, seed=9) == 5000
    hscm.trace.generate(b, kind="hot-writes", requests=5000, seed=9)
    ra, rb = hscm.trace.read(a), hscm.trace.read(b)
    assert all(np.array_equal(ra[k], rb[k]) for k in ra)
    with pytest.raises(ValueError, match="parameter kind"):
        hscm.trace.generate(a, kind="spiral")


def test_convert_writes_what_read_reads_back(tmp_path: Path) -> None:
    text = tmp_path / "t.ramulator"
    text.write_text("".join(f"{'ST' if i % 3 == 0 else 'LD'} 0x{64 * i:x}\n" for i in range(1, 101)))
    out = tmp_path / "t.hscm.zst"
    report = hscm.trace.convert(text, out, from_format="ramulator")
    assert report["written"] == 100
    back = hscm.trace.read(out)
    assert back["addr"].tolist() == [64 * i for i in range(1, 101)]
    assert int((back["kind"] == 1).sum()) == 33


def test_an_unreadable_trace_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(hscm.HscmError, match="missing.trace"):
        hscm.trace.read(tmp_path / "missing.trace")
    with pytest.raises(ValueError, match="unknown format"):
        hscm.trace.read(TRACES / "fft.hscm.zst", format="vcd")


def test_a_whole_trace_reads_as_a_dataframe_when_asked(tmp_path: Path) -> None:
    mem = tmp_path / "m.hscm.zst"
    hscm.trace.generate(mem, kind="zipf", requests=5000, footprint="1M", seed=4)
    columns = hscm.trace.read(mem)
    frame = hscm.trace.read(mem, as_frame=True)
    assert list(frame.columns) == list(columns) and len(frame) == 5000
    assert (frame["addr"].to_numpy() == columns["addr"]).all()
    req = tmp_path / "r.oracleGeneral.zst"
    hscm.trace.generate_requests(req, requests=3000, objects=300, seed=5)
    frame = hscm.trace.read_requests(req, as_frame=True)
    assert len(frame) == 3000 and frame["write"].dtype == bool
