"""Optuna's side of a sweep: its log lines follow kerneltune's logger, and its study log is checked before
Optuna reads it.

Optuna's own log lines are informational only where kerneltune's are (``kerneltune --verbose``), warnings
otherwise. Optuna's file storage appends after whatever the file ends with: a line torn by a full disk or a
kill would glue itself to the next write and break every later run, so a torn tail is cut first, and a log with
a broken line inside is set aside (the sweep rebuilds the study from its journal, which holds every result).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from kerneltune.files.safe_io import MAX_JOURNAL_BYTES, read_regular_bytes
from kerneltune.tables.stamps import now_stamp

from .journal import cut_torn_tail

log = logging.getLogger("kerneltune.optuna_log")


def usable_study_log(path: Path) -> None:
    """Leave ``path`` a study log Optuna can read and append to, or absent; says what it mended."""
    if cut := cut_torn_tail(path):
        log.warning("%s: cut a torn last line of %d bytes (a write cut by a full disk or a kill)", path, cut)
    try:
        data = read_regular_bytes(path, MAX_JOURNAL_BYTES, "study log")
    except FileNotFoundError:
        return
    for n, line in enumerate(data.splitlines(), 1):
        try:
            json.loads(line)
        except (ValueError, RecursionError):
            aside = path.with_name(f"{path.name}.broken-{now_stamp().replace(':', '')}")
            os.replace(path, aside)
            log.warning("%s:%d: not a study log line; the log is set aside as %s and the study rebuilt from the "
                        "sweep's journal", path, n, aside.name)
            return


def follow_kerneltune_logging() -> None:
    import optuna

    optuna.logging.set_verbosity(logging.getLogger("kerneltune").getEffectiveLevel())
