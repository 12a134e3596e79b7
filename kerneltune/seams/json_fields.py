"""A frozen dataclass's fields read from JSON as the dataclass declares them: what crosses the worker pipe
(``wire``'s replies, ``settings.MeasureSettings``) is checked by its own annotations, not by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

_JSON_TYPES = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}


def unknown_or_mistyped(cls: type, obj: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str | None:
    """Why ``obj`` cannot be ``cls``'s fields (a name it lacks, a value not of the declared type: a number sent as
    text, an int as a bool), or None. ``None`` values pass where the annotation allows them; ``skip``: fields the
    caller checks itself."""
    known = {f.name: str(f.type) for f in fields(cls)}
    if unknown := sorted(set(obj) - set(known)):
        return f"a {cls.__name__} has no {', '.join(unknown)}"
    for name, value in obj.items():
        if name in skip:
            continue
        kinds = known[name].split(" | ")
        if value is None and "None" in kinds:
            continue
        kind = kinds[0]
        if kind in _JSON_TYPES and type(value) not in _JSON_TYPES[kind]:
            return f"{name} {value!r} is not of type {kind}"
        if kind.startswith("Mapping") and not isinstance(value, Mapping):
            return f"{name} {value!r} is not an object"
    return None
