"""Pairwise covers of a configuration space, for tests that cannot afford its whole product."""

import itertools
from collections.abc import Callable, Sequence
from typing import Any


def value_pairs(fields: dict[str, Any]) -> set[tuple[tuple[str, Any], tuple[str, Any]]]:
    return {((a, fields[a]), (b, fields[b])) for a, b in itertools.combinations(sorted(fields), 2)}


def pairwise_cover[T](items: Sequence[T], fields_of: Callable[[T], dict[str, Any]] = lambda item: item) -> list[T]:
    """Greedily, items until every pair of two fields' values that some item holds is in one of them: a fault
    in one field's value or where two meet is caught; one that only a triple of values shows goes unseen."""
    pairs = [value_pairs(fields_of(item)) for item in items]
    left = set().union(*pairs)
    chosen = []
    while left:
        best = max(range(len(items)), key=lambda i: len(pairs[i] & left))
        chosen.append(items[best])
        left -= pairs[best]
    return chosen
