"""The report's experiments (``hscm reproduce``) from Python.

>>> report = hscm.experiments.reproduce(only=["memsim"], quick=True, out="report")  # doctest: +SKIP
>>> report["targets"]                                                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from . import _native

#: The sections of the report, in its order.
SECTIONS = ["memsim", "vmsim", "ring", "kv", "nbd", "fs", "tier", "python", "volume"]


def reproduce(
    out: str | os.PathLike[str] = "report",
    *,
    only: list[str] | None = None,
    quick: bool = False,
    **params: Any,
) -> dict[str, Any]:
    """Runs the report's experiments (all, or the sections in ``only``) into ``out``
    (report.md, report.json and the plots) and returns report.json's content. Other
    parameters are ``hscm reproduce``'s (seconds, restart_size, traces, ycsb_traces)."""
    unknown = [s for s in (only or []) if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section {unknown[0]!r} (known: {', '.join(SECTIONS)})")
    p = {"out": os.fspath(out), "only": only or [], "quick": quick, **params}
    _native.reproduce(json.dumps(p))
    return json.loads((Path(out) / "report.json").read_text())
