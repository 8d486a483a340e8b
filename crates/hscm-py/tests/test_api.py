"""The public API as one vocabulary.

Every public name and parameter of the package is in api_names.json: a new one is a
decision (regenerate the list with ``python crates/hscm-py/tests/test_api.py`` and
review the diff), and a rename shows up as a removal, which scripts would feel. The
rules below check one spelling per concept across every function."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import hscm
import hscm.experiments
import hscm.sim
import hscm.sweep
import hscm.trace

NAMES = Path(__file__).with_name("api_names.json")
MODULES = [hscm, hscm.sim, hscm.trace, hscm.sweep, hscm.experiments]

#: One spelling per concept: the spelling used, and the synonyms no function may use.
SPELLINGS = {
    "path": ["file", "filename", "fname", "filepath"],
    "overwrite": ["force", "replace", "clobber"],
    "read_only": ["readonly", "ro", "read"],
    "durability": ["sync", "fsync", "durable"],
    "size": ["nbytes", "length_bytes", "capacity"],
    "seed": ["random_state", "rng"],
    "workers": ["n_jobs", "jobs", "processes"],
    "out": ["out_dir", "output_dir", "outdir"],
}

#: Spellings kept where a caller may already pass them by keyword (a rename would
#: break them): the function, the parameter, and why.
KEPT = {("hscm.sweep.table", "out_dir"): "named before `out` was the one spelling"}

#: Where a function keeps a name a command-line flag gave it (flags are a contract):
#: hscm.sim.cache's ``policy`` is ``hscm sim cache --policy``, and
#: hscm.sim.memory's ``policies`` is ``hscm sim memory compare --policies``.
FLAG_NAMES = {"hscm.sim.cache": {"policy"}, "hscm.sim.memory": {"policies"}}


def parameters(obj: Any) -> list[str] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [p for p in sig.parameters if p not in ("self", "cls")]


def public(names: list[str]) -> list[str]:
    return sorted(n for n in names if not n.startswith("_"))


def walk() -> dict[str, list[str] | str | None]:
    """Every public function, class, method and property with its parameters."""
    api: dict[str, list[str] | str | None] = {}
    for module in MODULES:
        names = getattr(module, "__all__", None) or public(dir(module))
        for name in names:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or name in {"annotations"}:
                continue
            home = getattr(obj, "__module__", "")
            if module is not hscm and home != module.__name__:
                continue  # imported helpers (Path, Any, the parameter encoder, ...)
            key = f"{module.__name__}.{name}"
            if inspect.isclass(obj):
                api[key] = parameters(obj)
                for member in public(list(vars(obj))):
                    attr = inspect.getattr_static(obj, member)
                    if callable(attr) or isinstance(attr, (staticmethod, classmethod)):
                        api[f"{key}.{member}"] = parameters(getattr(obj, member))
                    else:
                        api[f"{key}.{member}"] = "property"
            elif callable(obj):
                api[key] = parameters(obj)
    return dict(sorted(api.items()))


def test_the_public_api_is_the_listed_one() -> None:
    listed = json.loads(NAMES.read_text())
    now = walk()
    added = sorted(set(now) - set(listed))
    removed = sorted(set(listed) - set(now))
    changed = sorted(k for k in set(now) & set(listed) if now[k] != listed[k])
    assert not (added or removed or changed), (
        f"added {added}, removed {removed}, changed parameters {changed}: "
        f"if intended, regenerate {NAMES.name} (python {Path(__file__).name})"
    )


def test_one_spelling_per_concept() -> None:
    for key, params in walk().items():
        for param in params if isinstance(params, list) else []:
            for spelling, synonyms in SPELLINGS.items():
                if (key, param) not in KEPT:
                    assert param not in synonyms, f"{key}({param}): spell it {spelling!r}"
    for key, kept in FLAG_NAMES.items():
        params = walk()[key]
        assert isinstance(params, list) and kept <= set(params), f"{key} lost the flag name {kept}"


def test_every_size_takes_an_int_or_a_string(tmp_path: Path) -> None:
    hscm.Volume.create(tmp_path / "a.hscm", "4M")
    hscm.Volume.create(tmp_path / "b.hscm", 4 << 20)
    hscm.TieredVolume.create(tmp_path / "c.hscm", "8M", "1M", block="8k")
    hscm.TieredVolume.create(tmp_path / "d.hscm", 8 << 20, 1 << 20, block=8192)
    for name in ("a", "b"):
        with hscm.open(tmp_path / f"{name}.hscm") as v:
            assert v.size == 4 << 20
    for name in ("c", "d"):
        with hscm.open(tmp_path / f"{name}.hscm") as v:
            assert v.size == 8 << 20 and v.config()["block"] == 8192


if __name__ == "__main__":
    NAMES.write_text(json.dumps(walk(), indent=1) + "\n")
    print(f"wrote {NAMES}", file=sys.stderr)
