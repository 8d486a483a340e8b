"""hscm from Python.

The simulators (``hscm.sim``), traces (``hscm.trace``), the durable RAM volume and the
key-value store (``hscm.Volume``, ``hscm.KeyValueStore``), the report's experiments
(``hscm.experiments``) and parameter sweeps (``hscm.sweep``), all backed by the same
Rust libraries as the ``hscm`` command, with the same parameter names.

>>> import hscm
>>> df = hscm.sim.memory("traces/cjpeg.hscm.zst", policies=["dram-only", "warm"])
>>> df[["policy", "norm.energy"]]                                   # doctest: +SKIP

Submodules load on first use, so a sweep's worker process that only runs points does
not pay for pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._native import HscmError, KeyValueStore, Volume, git_revision
from ._native import version as _version

__version__: str = _version()
__all__ = [
    "HscmError",
    "KeyValueStore",
    "Volume",
    "__version__",
    "experiments",
    "git_revision",
    "sim",
    "sweep",
    "trace",
]

if TYPE_CHECKING:
    from . import experiments, sim, sweep, trace

_SUBMODULES = {"sim", "trace", "sweep", "experiments"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'hscm' has no attribute {name!r}")
