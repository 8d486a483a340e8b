"""The report's experiments (``hscm reproduce``) from Python.

>>> report = hscm.experiments.reproduce(only=["memsim"], quick=True, out="report")  # doctest: +SKIP
>>> report["targets"]                                                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: The sections of the report, in its order.
SECTIONS = ["memsim", "vmsim", "ring", "kv", "nbd", "fs", "tier", "python", "volume"]

#: ``hscm reproduce``'s parameters beyond ``out``, ``only`` and ``quick``, by keyword.
PARAMETERS = {
    "seconds": "--seconds",
    "restart_size": "--restart-size",
    "traces": "--traces",
    "ycsb_traces": "--ycsb-traces",
}


def hscm_binary() -> str:
    """The ``hscm`` program the report runs in: ``$HSCM_BIN`` when set, else ``hscm``
    on PATH. The report drives servers, mounts and plots, which live in the program
    rather than in this module, so the wheel stays small."""
    explicit = os.environ.get("HSCM_BIN")
    if explicit:
        return explicit
    found = shutil.which("hscm")
    if found is None:
        raise FileNotFoundError(
            "the report runs in the hscm program, which is not on PATH: install it "
            "(cargo install --path crates/hscm-cli, or the hscm package) or set HSCM_BIN"
        )
    return found


def reproduce(
    out: str | os.PathLike[str] = "report",
    *,
    only: list[str] | None = None,
    quick: bool = False,
    **params: Any,
) -> dict[str, Any]:
    """Runs the report's experiments (all, or the sections in ``only``) into ``out``
    (report.md, report.json and the plots) and returns report.json's content. Other
    parameters are ``hscm reproduce``'s: seconds, restart_size (bytes, or a size such
    as "8G"), traces and ycsb_traces. It runs ``hscm reproduce`` (see
    :func:`hscm_binary`); its failure raises :class:`hscm.HscmError` with the program's
    own message."""
    unknown = [s for s in (only or []) if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section {unknown[0]!r} (known: {', '.join(SECTIONS)})")
    for key in params:
        if key not in PARAMETERS:
            raise ValueError(f"unknown field `{key}` (known: out, only, quick, {', '.join(PARAMETERS)})")
    argv = [hscm_binary(), "reproduce", "--out", os.fspath(out)]
    if only:
        argv += ["--only", ",".join(only)]
    if quick:
        argv.append("--quick")
    for key, value in params.items():
        argv += [PARAMETERS[key], os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    run = subprocess.run(argv, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        from . import HscmError

        raise HscmError(f"hscm reproduce failed (exit {run.returncode}): {run.stderr.strip()}")
    return json.loads((Path(out) / "report.json").read_text())
