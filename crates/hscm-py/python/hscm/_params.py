"""Keyword parameters to the JSON the native module reads."""

from __future__ import annotations

import json
import os
from typing import Any


def _value(name: str, v: Any) -> Any:
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (str, bool, int, float)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_value(name, x) for x in v]
    # numpy scalars and the like
    if hasattr(v, "item") and callable(v.item):
        return _value(name, v.item())
    raise TypeError(
        f"parameter {name}: expected a number, a string, a boolean or a list of them, "
        f"got {type(v).__name__}"
    )


def encode(params: dict[str, Any]) -> str:
    """The parameters as a JSON object, None values dropped (the default applies)."""
    return json.dumps({k: _value(k, v) for k, v in params.items() if v is not None})
