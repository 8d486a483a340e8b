"""hscm.open: every kind of volume through the serving layer, each as its own object,
its data kept across a close; volumes the CLI made and ones Python made alike."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import hscm
from conftest import run_cli


def test_a_flat_volume_opens_as_a_volume(tmp_path: Path) -> None:
    path = tmp_path / "flat.hscm"
    hscm.Volume.create(path, 8 << 20)
    assert hscm.volume_kind(path) == "flat"
    with hscm.open(path) as v:
        assert isinstance(v, hscm.Volume)
        v.write(4096, b"flat data")
    with hscm.open(path, read_only=True) as v:
        assert v.read(4096, 9) == b"flat data"
        with pytest.raises(hscm.HscmError):
            v.write(0, b"x")
    # Sizes as the simulators take them: an int, or a string with a unit.
    journaled = tmp_path / "journaled.hscm"
    hscm.Volume.create(journaled, "8M", journal_size="256k", durability="on-flush")
    with hscm.Volume(journaled) as v:
        assert v.size == 8 << 20 and v.durability == "on-flush"
    with hscm.Volume(path, durability="write-back", dirty_max="1M") as v:
        assert v.read(4096, 9) == b"flat data"
    with pytest.raises(ValueError, match="journal_size"):
        hscm.Volume.create(tmp_path / "bad.hscm", "8M", journal_size="much")


def test_a_tiered_volume_opens_with_its_counters(tmp_path: Path, hscm_bin: Path) -> None:
    made_by_cli = tmp_path / "cli.hscm"
    run_cli(hscm_bin, "volume", "create", str(made_by_cli), "--size", "16M", "--ram", "1M")
    made_by_python = tmp_path / "py.hscm"
    hscm.TieredVolume.create(made_by_python, "16M", 1 << 20, policy="s3fifo")
    for path in (made_by_cli, made_by_python):
        assert hscm.volume_kind(path) == "tiered"
        with hscm.open(path) as v:
            assert isinstance(v, hscm.TieredVolume)
            assert v.size == 16 << 20
            v.write(8192, b"tiered" * 1000)
            v.flush()
            assert v.read(8192, 6) == b"tiered"
            stats = v.stats()
            assert isinstance(stats, dict) and stats, stats
        with hscm.open(path) as v:
            assert v.read(8192, 6000) == b"tiered" * 1000
    with hscm.open(made_by_python) as v:
        assert v.config()["eviction"] == "s3fifo"
    # The flat volume's class says where a tiered volume goes.
    with pytest.raises(hscm.HscmError, match="hscm.open"):
        hscm.Volume(made_by_cli)
    # A tiered volume opens read-write only, and says so.
    with pytest.raises(hscm.HscmError, match="read-only access is not supported"):
        hscm.open(made_by_cli, read_only=True)
    # What the CLI reads back: the counters were saved at close.
    out = run_cli(hscm_bin, "volume", "stats", str(made_by_cli), "--json")
    assert '"closed"' in out


def test_a_file_system_volume_opens_as_its_files(tmp_path: Path, hscm_bin: Path) -> None:
    path = tmp_path / "fs.hscm"
    run_cli(hscm_bin, "volume", "create", str(path), "--size", "32M", "--fs")
    assert hscm.volume_kind(path) == "fs"
    with hscm.open(path) as fs:
        assert isinstance(fs, hscm.FileSystem)
        assert fs.listdir() == []
        fs.mkdir("/logs")
        assert fs.write("/logs/app.log", b"line 1\n" * 100) == 700
        fs.write("/top", b"replaced later")
        fs.write("/top", b"short")
        assert fs.statfs()["block_size"] == 4096
    with hscm.open(path, read_only=True) as fs:
        assert fs.listdir() == ["logs", "top"]
        assert fs.listdir("/logs") == ["app.log"]
        assert fs.read("/logs/app.log") == b"line 1\n" * 100
        assert fs.read("/top") == b"short"
        st = fs.stat("/logs/app.log")
        assert st["size"] == 700 and st["kind"] == "file" and st["uid"] == os.getuid()
        assert fs.stat("/logs")["kind"] == "dir"
        with pytest.raises(FileNotFoundError, match="/nope"):
            fs.read("/nope")
        with pytest.raises(OSError):
            fs.write("/new", b"refused")
    with hscm.open(path) as fs:
        fs.remove("/top")
        fs.remove("/logs/app.log")
        fs.remove("/logs")
        assert fs.listdir() == []
    # The mount sees what Python left (hscm volume check reads the volume as the CLI does).
    subprocess.run([str(hscm_bin), "volume", "check", str(path)], check=True, capture_output=True)


def test_open_names_what_is_not_a_volume(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x5a" * 8192)
    with pytest.raises(hscm.HscmError, match="not an hscm volume"):
        hscm.open(garbage)
    with pytest.raises(hscm.HscmError, match="missing.hscm"):
        hscm.open(tmp_path / "missing.hscm")
    with pytest.raises(ValueError, match="size"):
        hscm.TieredVolume.create(tmp_path / "t.hscm", "lots", "1M")


def test_one_process_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "flat.hscm"
    hscm.Volume.create(path, 4 << 20)
    with hscm.open(path):
        with pytest.raises(hscm.HscmError):
            hscm.open(path)
    with hscm.open(path) as v:
        assert not v.closed
    assert v.closed


def test_every_engine_object_shares_one_lifecycle(tmp_path: Path, hscm_bin: Path) -> None:
    flat = tmp_path / "flat.hscm"
    hscm.Volume.create(flat, "4M")
    tiered = tmp_path / "tiered.hscm"
    hscm.TieredVolume.create(tiered, "8M", "1M")
    fs = tmp_path / "fs.hscm"
    run_cli(hscm_bin, "volume", "create", str(fs), "--size", "16M", "--fs")
    hscm.KeyValueStore.create(tmp_path / "kv", devices=1)
    objects = [hscm.open(flat), hscm.open(tiered), hscm.open(fs), hscm.KeyValueStore(tmp_path / "kv")]
    for obj, name in zip(objects, ["Volume", "TieredVolume", "FileSystem", "KeyValueStore"]):
        assert repr(obj).startswith(f"{name}(") and not obj.closed
        with pytest.raises(RuntimeError, match="inside"):
            with obj:
                raise RuntimeError("inside")  # the exit closes and does not swallow it
        assert obj.closed
        obj.close()  # twice is harmless


def test_a_tiered_volume_replays_a_trace_from_python(tmp_path: Path) -> None:
    trace = tmp_path / "t.oracleGeneral.zst"
    n = hscm.trace.generate_requests(trace, requests=4000, objects=500, alpha=0.9, object_size=4096, seed=7)
    path = tmp_path / "t.hscm"
    hscm.TieredVolume.create(path, "8M", "256k")
    with hscm.open(path) as v:
        r = v.replay(trace)
        with pytest.raises(ValueError, match="unknown format"):
            v.replay(trace, format="nope")
    assert r["requests"] == n and r["reads"] + r["writes"] == n
    dram = r["tiers"][0]
    assert dram["tier"] == "dram" and dram["hits"] + dram["misses"] >= n, dram
    assert 0 < dram["hits"] < n, dram
    assert r["started_warm"] is False
