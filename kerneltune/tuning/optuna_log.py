"""Optuna's own log lines follow kerneltune's logger: informational only where kerneltune's are
(``kerneltune --verbose``), warnings otherwise. Called where a study's storage is made, after Optuna's
import has set its logger to INFO."""

from __future__ import annotations

import logging


def follow_kerneltune_logging() -> None:
    import optuna

    optuna.logging.set_verbosity(logging.getLogger("kerneltune").getEffectiveLevel())
