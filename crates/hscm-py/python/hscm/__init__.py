"""hscm from Python.

The simulators (``hscm.sim``), traces (``hscm.trace``), volumes of every kind
(``hscm.open``: ``hscm.Volume``, ``hscm.TieredVolume``, ``hscm.FileSystem``), the
key-value store (``hscm.KeyValueStore``), the report's experiments
(``hscm.experiments``) and parameter sweeps (``hscm.sweep``), all backed by the same
Rust libraries as the ``hscm`` command, with the same parameter names.

>>> import hscm
>>> df = hscm.sim.memory("traces/cjpeg.hscm.zst", policies=["dram-only", "warm"])
>>> df[["policy", "norm.energy"]]                                   # doctest: +SKIP

Submodules load on first use, so a sweep's worker process that only runs points does
not pay for pandas.
"""

# No name here but the API's (`__all__`): the modules this file uses are imported
# under private names, and `dir(hscm)` lists the API alone.
import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._native import FileSystem, HscmError, KeyValueStore, TieredVolume, Volume, git_revision
from ._native import open as _open
from ._native import version as _version
from ._native import volume_kind as _volume_kind

__version__: str = _version()
__all__ = [
    "FileSystem",
    "HscmError",
    "KeyValueStore",
    "TieredVolume",
    "Volume",
    "__version__",
    "experiments",
    "git_revision",
    "open",
    "sim",
    "sweep",
    "trace",
    "volume_kind",
]


def open(path: str | _os.PathLike[str], *, read_only: bool = False) -> Volume | TieredVolume | FileSystem:  # noqa: A001
    """Opens the volume at ``path`` by its kind, read from its header: a flat volume as
    :class:`Volume`, a tiered one as :class:`TieredVolume`, one made with ``--fs`` as
    :class:`FileSystem` (its files by path). Each is a context manager; ``close()``
    makes everything durable and releases the volume.

    >>> with hscm.open("data.hscm") as v:                     # doctest: +SKIP
    ...     v.write(0, b"hello")
    """
    return _open(_os.fspath(path), read_only)


def volume_kind(path: str | _os.PathLike[str]) -> str:
    """``"flat"``, ``"tiered"`` or ``"fs"``: the kind of volume at ``path``, from its
    header (nothing is opened or locked)."""
    return _volume_kind(_os.fspath(path))

if _TYPE_CHECKING:
    from . import experiments, sim, sweep, trace

_SUBMODULES = {"sim", "trace", "sweep", "experiments"}


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'hscm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
