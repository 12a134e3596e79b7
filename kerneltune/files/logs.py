"""A warning said once per process: the lookup runs at every trace and a journal is read many times a sweep,
but a bad table or a bad line is news only the first time."""

from __future__ import annotations

import logging

_said: set[tuple[str, str]] = set()


def log_once(logger: logging.Logger, message: str, level: int = logging.WARNING) -> None:
    if (logger.name, message) not in _said:
        _said.add((logger.name, message))
        logger.log(level, message)
