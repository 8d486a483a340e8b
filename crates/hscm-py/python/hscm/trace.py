"""Traces as numpy arrays, streamed a chunk at a time for large ones; the synthetic
generators and the converter of ``hscm trace``.

Memory traces (lackey, ramulator, dramsim3, nvmain, dramsys, hscm) give columns
``addr`` (uint64), ``kind`` (uint8: 0 read, 1 write, 2 instruction fetch), ``size``
(uint32) and ``delta`` (uint64: instructions or cycles since the previous reference).
Request traces (oracleGeneral, csv, lis, spc, msr, lackey) give ``time`` (uint64),
``key`` (uint64), ``size`` (uint32), ``write`` (bool) and ``next`` (int64: index of the
key's next request, -1 never, -2 unknown).

>>> refs = hscm.trace.read("traces/cjpeg.hscm.zst")                 # doctest: +SKIP
>>> (refs["kind"] == 1).mean()                                       # share of writes
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _native
from ._params import encode

PathLike = str | os.PathLike[str]

_MEMORY = {"addr": "<u8", "kind": "u1", "size": "<u4", "delta": "<u8"}
_REQUESTS = {"time": "<u8", "key": "<u8", "size": "<u4", "write": "u1", "next": "<i8"}

#: References or requests per chunk when streaming.
DEFAULT_CHUNK = 1 << 20


def _arrays(raw: dict[str, bytes], dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    out = {k: np.frombuffer(raw[k], dtype=dt) for k, dt in dtypes.items()}
    if "write" in out:
        out["write"] = out["write"].astype(bool)
    return out


def chunks(
    path: PathLike, format: str | None = None, *, chunk: int = DEFAULT_CHUNK
) -> Iterator[dict[str, np.ndarray]]:
    """A memory trace, ``chunk`` references at a time (the format detected when not
    given)."""
    reader = _native.MemoryTraceReader(os.fspath(path), format)
    while (raw := reader.next_chunk(chunk)) is not None:
        yield _arrays(raw, _MEMORY)


def read(path: PathLike, format: str | None = None, *, as_frame: bool = False) -> Any:
    """A whole memory trace as columns (see the module's docstring): a dict of numpy
    arrays, or with ``as_frame=True`` a pandas DataFrame with those columns."""
    return _shaped(_concat(chunks(path, format), _MEMORY), as_frame)


def request_chunks(
    path: PathLike,
    format: str | None = None,
    *,
    block: int = 4096,
    chunk: int = DEFAULT_CHUNK,
) -> Iterator[dict[str, np.ndarray]]:
    """An object-request trace, ``chunk`` requests at a time; offset/size formats are
    split into ``block``-byte requests, as ``hscm sim cache --block`` does."""
    reader = _native.RequestTraceReader(os.fspath(path), format, block)
    while (raw := reader.next_chunk(chunk)) is not None:
        yield _arrays(raw, _REQUESTS)


def read_requests(
    path: PathLike, format: str | None = None, *, block: int = 4096, as_frame: bool = False
) -> Any:
    """A whole object-request trace as columns (see the module's docstring): a dict of
    numpy arrays, or with ``as_frame=True`` a pandas DataFrame with those columns."""
    return _shaped(_concat(request_chunks(path, format, block=block), _REQUESTS), as_frame)


def _shaped(columns: dict[str, np.ndarray], as_frame: bool) -> Any:
    if not as_frame:
        return columns
    import pandas as pd  # only when asked: a sweep's worker never pays for it

    return pd.DataFrame(columns, copy=False)


def _concat(parts: Iterator[dict[str, np.ndarray]], dtypes: dict[str, str]) -> dict[str, np.ndarray]:
    got = list(parts)
    if not got:
        empty = {k: np.empty(0, dtype=dt) for k, dt in dtypes.items()}
        if "write" in empty:
            empty["write"] = empty["write"].astype(bool)
        return empty
    return {k: np.concatenate([p[k] for p in got]) for k in got[0]}


def generate(output: PathLike, **params: Any) -> int:
    """Writes a synthetic memory trace (``hscm trace gen``: kind, requests, footprint,
    writes, gap, share, param, seed); returns how many references."""
    return _native.generate_memory(encode({"output": output, **params}))


def generate_requests(output: PathLike, **params: Any) -> int:
    """Writes a synthetic object-request trace (``hscm trace gen-requests``: requests,
    objects, alpha, one_time, scan, loop, loop_len, object_size, seed); returns how
    many requests."""
    if "loop" in params:
        params["loop_share"] = params.pop("loop")
    return _native.generate_requests(encode({"output": output, **params}))


def convert(
    input: PathLike,
    output: PathLike,
    *,
    from_format: str | None = None,
    start_pc: int | None = None,
    instructions: int | None = None,
    post_cache: bool = False,
) -> dict[str, Any]:
    """``hscm trace convert``: to hscm's binary format; returns its report."""
    return json.loads(
        _native.convert(
            os.fspath(input), os.fspath(output), from_format, start_pc, instructions, post_cache
        )
    )
