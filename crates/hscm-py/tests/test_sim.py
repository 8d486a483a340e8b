"""Each simulator returns the same numbers from Python as from the command line, and
refuses bad parameters by name."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import hscm

from conftest import TRACES, run_cli

# Figures of the run rather than of the simulation (throughput, memory of the process).
MEASURED = {"requests_per_s", "peak_rss_mb"}


def strip_measured(v):
    if isinstance(v, dict):
        return {k: strip_measured(x) for k, x in v.items() if k not in MEASURED}
    if isinstance(v, list):
        return [strip_measured(x) for x in v]
    return v


def test_memory_simulator_gives_the_cli_numbers(hscm_bin: Path) -> None:
    trace = str(TRACES / "fft.hscm.zst")
    cli = json.loads(run_cli(hscm_bin, "sim", "memory", "compare", "--trace", trace,
                             "--policies", "dram-only,warm,rapp", "--dram-size", "1M",
                             "--warm-threshold", "2", "--json"))
    py = hscm.sim.memory(trace, policies=["dram-only", "warm", "rapp"], dram_size="1M",
                         warm_threshold=2, raw=True)
    assert py == cli
    df = hscm.sim.memory(trace, policies=["dram-only", "warm", "rapp"], dram_size="1M",
                         warm_threshold=2)
    assert isinstance(df, pd.DataFrame)
    assert list(df["policy"]) == ["dram-only", "warm", "rapp"]
    assert df["edp"].tolist() == [p["edp"] for p in cli["policies"]]
    assert df.loc[1, "norm.energy"] == cli["policies"][1]["norm"]["energy"]


def test_cache_simulator_gives_the_cli_numbers(hscm_bin: Path, request_trace: Path) -> None:
    cli = json.loads(run_cli(hscm_bin, "sim", "cache", "--trace", str(request_trace),
                             "--policy", "lru,s3fifo,belady", "--size", "1%,10%", "--json"))
    py = hscm.sim.cache(request_trace, policy=["lru", "s3fifo", "belady"], size=["1%", "10%"],
                        raw=True)
    assert strip_measured(py) == strip_measured(cli)
    df = hscm.sim.cache(request_trace, policy=["lru", "s3fifo", "belady"], size=["1%", "10%"])
    assert len(df) == 6
    assert df["miss_ratio"].tolist() == [r["miss_ratio"] for r in cli]
    # Objects and the one-pass LRU curve, too.
    cli = json.loads(run_cli(hscm_bin, "sim", "cache", "--trace", str(request_trace),
                             "--size", "10,100,1000", "--objects", "--one-pass", "--json"))
    py = hscm.sim.cache(request_trace, size=[10, 100, 1000], objects=True, one_pass=True, raw=True)
    assert strip_measured(py) == strip_measured(cli)


def test_paging_simulator_gives_the_cli_numbers(hscm_bin: Path, tmp_path: Path) -> None:
    trace = tmp_path / "refs.hscm.zst"
    hscm.trace.generate(trace, kind="zipf", requests=20000, footprint="4M", seed=5)
    cli = json.loads(run_cli(hscm_bin, "sim", "paging", "--trace", str(trace),
                             "--page-sizes", "1k,4k,16k", "--memory", "25%", "--json"))
    py = hscm.sim.paging(trace, page_sizes=["1k", "4k", "16k"], memory="25%", raw=True)
    assert py == cli
    df = hscm.sim.paging(trace, page_sizes=[1024, 4096, 16384], memory="25%")
    assert len(df) == 3 * 4  # page sizes x the default four latencies
    assert df["t_total_ns"].tolist() == [r["t_total_ns"] for r in cli["rows"]]


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda t: hscm.sim.memory(t, dram_sise="1G"), "parameter dram_sise: unknown parameter"),
        (lambda t: hscm.sim.memory(t, dram_size="lots"), "parameter dram_size: invalid value \"lots\""),
        (lambda t: hscm.sim.memory(t, policies=["warm", "coldest"]), "parameter policies"),
        (lambda t: hscm.sim.memory(t, warm_threshold=[1, 2]), "parameter warm_threshold: takes one value"),
        (lambda t: hscm.sim.memory(t, json=True), "parameter json: unknown parameter"),
        (lambda t: hscm.sim.cache(t, objects=3), "parameter objects: expected true or false"),
    ],
)
def test_a_bad_parameter_is_refused_by_name(call, needle: str) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        call(str(TRACES / "fft.hscm.zst"))


def test_a_value_python_cannot_pass_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="parameter dram_size: expected a number"):
        hscm.sim.memory(TRACES / "fft.hscm.zst", dram_size={"a": 1})


def test_an_unreadable_trace_raises_the_library_error(tmp_path: Path) -> None:
    with pytest.raises(hscm.HscmError, match="no/such.trace"):
        hscm.sim.memory("no/such.trace")
    garbage = tmp_path / "garbage.hscm"
    garbage.write_bytes(b"\x00\x01not a trace at all\n" * 10)
    with pytest.raises(hscm.HscmError):
        hscm.sim.cache(garbage, format="oracle-general")


def test_parameter_names_are_the_commands() -> None:
    names = hscm.sim.parameters("memory")
    assert {"trace", "policies", "dram_size", "warm_threshold", "seed"} <= set(names)
    assert "json" not in names
    with pytest.raises(ValueError, match="unknown simulator"):
        hscm.sim.parameters("disk")
