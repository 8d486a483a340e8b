"""The durable RAM volume and the key-value store from Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hscm


def test_a_volume_keeps_what_was_written_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "v.hscm"
    hscm.Volume.create(path, 4 << 20)
    with hscm.Volume(path) as v:
        assert v.size == 4 << 20 and v.durability == "immediate"
        assert v.write(4096, b"hello, volume") == 13
        v.write(1 << 20, bytearray(b"\xab" * 8192), durability="on-flush")
        v.write(2 << 20, np.arange(512, dtype=np.uint64))  # any contiguous buffer
        v.flush()
        assert v.read(4096, 13) == b"hello, volume"
    assert v.closed
    with pytest.raises(hscm.HscmError, match="closed"):
        v.read(0, 1)
    with hscm.Volume(path, read_only=True) as v:
        p = v.wait_loaded(timeout=30)
        assert p["state"] == "done" and p["fraction"] == 1.0
        assert v.read(4096, 13) == b"hello, volume"
        assert v.read((1 << 20) + 8191, 2) == b"\xab\x00"
        arr = np.zeros(512, dtype=np.uint64)
        assert v.read_into(2 << 20, memoryview(arr).cast("B")) == 4096
        assert np.array_equal(arr, np.arange(512, dtype=np.uint64))
        buf = bytearray(5)
        v.read_into(4096, buf)
        assert buf == b"hello"
        with pytest.raises(hscm.HscmError):
            v.write(0, b"x")  # opened read-only


def test_a_write_back_session_keeps_what_a_flush_covered(tmp_path: Path) -> None:
    path = tmp_path / "wb.hscm"
    hscm.Volume.create(path, 4 << 20)
    with hscm.Volume(path, durability="write-back", dirty_max=64 << 10) as v:
        assert v.durability == "write-back"
        for i in range(64):  # four times the bound: writers wait for passes
            v.write(i * 65536, bytes([i + 1]) * 4096)
        v.flush()
    with hscm.Volume(path, read_only=True) as v:
        assert all(v.read(i * 65536, 4096) == bytes([i + 1]) * 4096 for i in range(64))
    with pytest.raises(ValueError, match='unknown durability "write-behind"'):
        hscm.Volume(path, durability="write-behind")


def test_a_volume_refuses_bad_requests_by_name(tmp_path: Path) -> None:
    path = tmp_path / "v.hscm"
    hscm.Volume.create(path, 1 << 20)
    with pytest.raises(hscm.HscmError, match="exists"):
        hscm.Volume.create(path, 1 << 20)
    with pytest.raises(ValueError, match="unknown durability"):
        hscm.Volume.create(tmp_path / "w.hscm", 1 << 20, durability="eventually")
    with hscm.Volume(path) as v:
        with pytest.raises(hscm.HscmError, match="past the end"):
            v.read((1 << 20) - 2, 4)
        with pytest.raises(hscm.HscmError, match="past the end"):
            v.read(0, 1 << 62)  # refused, not allocated
        with pytest.raises(hscm.HscmError):
            v.write(1 << 20, b"x")
        with pytest.raises(ValueError, match="writable"):
            v.read_into(0, b"read-only bytes")
        assert v.read(0, 4) == b"\0\0\0\0", "a refused write changed nothing"
    with pytest.raises(hscm.HscmError, match="nothing-here"):
        hscm.Volume(tmp_path / "nothing-here.hscm")
    (tmp_path / "junk.hscm").write_bytes(b"junk" * 2048)
    with pytest.raises(hscm.HscmError):
        hscm.Volume(tmp_path / "junk.hscm")


def test_the_key_value_store_keeps_puts_and_deletes_across_a_reopen(tmp_path: Path) -> None:
    d = tmp_path / "kv"
    hscm.KeyValueStore.create(d, devices=2)
    with hscm.KeyValueStore(d) as kv:
        for i in range(100):
            kv.put(f"key{i}".encode(), f"value{i}".encode() * 3)
        kv.delete(b"key7")
        kv.delete(b"never-there")
        assert kv.get(b"key7") is None
        assert kv.get(b"key8") == b"value8value8value8"
    with hscm.KeyValueStore(d, mode="sprint") as kv:
        assert kv.get(b"key99") == b"value99" * 3
        assert kv.get(b"key7") is None
    with pytest.raises(ValueError, match="unknown mode"):
        hscm.KeyValueStore(d, mode="turbo")
    with pytest.raises(hscm.HscmError, match="already holds a store"):
        hscm.KeyValueStore.create(d)
