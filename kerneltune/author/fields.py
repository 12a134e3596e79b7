"""A problem and a config as a kernel author reads them: named fields, ``p.rows`` or ``p["rows"]``.

Both are immutable and hashable (a build may be memoised on them) and compare equal to a plain dict of
the same fields, so a table's config and a space's config are the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Fields(Mapping[str, Any]):
    __slots__ = ("_items",)
    _items: dict[str, Any]

    def __init__(self, fields: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        object.__setattr__(self, "_items", {**(fields or {}), **more})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __getattr__(self, name: str) -> Any:
        try:
            return self._items[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r} (fields: "
                                 f"{', '.join(self._items) or 'none'})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._items.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._items.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._items,)


class Problem(Fields):
    """One problem a kernel solves: the fields of a bucket (shapes, dtypes, flags)."""

    __slots__ = ()


class Config(Fields):
    """One point of the kernel's space: a value for every tunable parameter."""

    __slots__ = ()
