"""The simulators, with the ``hscm sim`` commands' parameters under the same names.

Every function takes the trace and the command's flags as keyword arguments, with
``-`` written ``_`` (``--dram-size 64M`` is ``dram_size="64M"``); the defaults, checks
and error messages are the command's own. A list fills a comma-separated flag, a
boolean switches a flag. Each returns a pandas DataFrame with one row per result
(nested figures flattened to ``outer.inner`` columns), or with ``raw=True`` exactly
the object the command prints with ``--json``.

>>> hscm.sim.cache("t.oracleGeneral.zst", policy=["lru", "s3fifo"], size=["1%", "10%"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, overload

import pandas as pd

from . import _native
from ._params import encode

PathLike = str | os.PathLike[str]


def parameters(simulator: str) -> list[str]:
    """The parameter names ``simulator`` ("memory", "cache" or "paging") accepts."""
    return _native.param_names(simulator)


def _run(simulator: str, params: dict[str, Any]) -> Any:
    return json.loads(_native.sim_run(simulator, encode(params)))


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.json_normalize(rows, sep=".")


@overload
def memory(trace: PathLike, policies: list[str] | str | None = ..., *, raw: Literal[False] = ..., **params: Any) -> pd.DataFrame: ...
@overload
def memory(trace: PathLike, policies: list[str] | str | None = ..., *, raw: Literal[True], **params: Any) -> dict[str, Any]: ...
def memory(
    trace: PathLike,
    policies: list[str] | str | None = None,
    *,
    raw: bool = False,
    **params: Any,
) -> pd.DataFrame | dict[str, Any]:
    """Hybrid DRAM + PCM main memory (``hscm sim memory compare``).

    One row per policy (dram-only, pcm-only, static, warm, rapp; all five by default)
    with energy, performance and energy-delay product, normalised to DRAM-only in the
    ``norm.*`` columns when it ran.

    >>> df = hscm.sim.memory("traces/cjpeg.hscm.zst", policies=["dram-only", "warm"],
    ...                      dram_size="64M", warm_threshold=2)      # doctest: +SKIP
    """
    out = _run("memory", {"trace": trace, "policies": policies, **params})
    if raw:
        return out
    df = _frame(out["policies"])
    df.insert(0, "trace", out["trace"])
    return df


@overload
def cache(trace: PathLike, policy: list[str] | str | None = ..., size: list[Any] | Any = ..., objects: bool = ..., *, raw: Literal[False] = ..., **params: Any) -> pd.DataFrame: ...
@overload
def cache(trace: PathLike, policy: list[str] | str | None = ..., size: list[Any] | Any = ..., objects: bool = ..., *, raw: Literal[True], **params: Any) -> list[dict[str, Any]]: ...
def cache(
    trace: PathLike,
    policy: list[str] | str | None = None,
    size: list[Any] | Any = None,
    objects: bool = False,
    *,
    raw: bool = False,
    **params: Any,
) -> pd.DataFrame | list[dict[str, Any]]:
    """File cache over storage (``hscm sim cache``): one row per policy and size.

    ``size`` takes object counts (ints), byte sizes ("64MiB") or shares of the
    footprint ("10%"); ``one_pass=True`` gives every LRU size from one pass.

    >>> hscm.sim.cache("t.oracleGeneral.zst", policy=["lru", "arc"], size=["1%", "10%"])  # doctest: +SKIP
    """
    rows = _run(
        "cache", {"trace": trace, "policy": policy, "size": size, "objects": objects, **params}
    )
    return rows if raw else _frame(rows)


@overload
def paging(trace: PathLike, *, raw: Literal[False] = ..., **params: Any) -> pd.DataFrame: ...
@overload
def paging(trace: PathLike, *, raw: Literal[True], **params: Any) -> dict[str, Any]: ...
def paging(trace: PathLike, *, raw: bool = False, **params: Any) -> pd.DataFrame | dict[str, Any]:
    """Virtual-memory paging (``hscm sim paging``): one row per page size and storage
    latency, with TLB and fault figures and eq. 4-6's times.

    >>> hscm.sim.paging("traces/paging/sort.hscm.zst", memory="50%", page_sizes=[4096, 8192])  # doctest: +SKIP
    """
    out = _run("paging", {"trace": trace, **params})
    if raw:
        return out
    df = _frame(out["rows"])
    df.insert(0, "memory_bytes", out["memory_bytes"])
    return df
