"""A space given as a list of whole configs (``configs = [...]`` on a kernel): each a mapping, or a Triton
``triton.Config`` (what ``@triton.autotune(configs=...)`` holds), read as plain fields a table can store."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")  # a Triton config's launch options, beside its kwargs


def config_fields(config: Any, where: str) -> dict[str, Any]:
    """``config`` as fields: a mapping as it is; a ``triton.Config`` as its kwargs and launch options (``maxnreg``
    where set), which ``fn[grid](..., **fields)`` launches as Triton's autotuner would. A ValueError naming
    ``where`` for anything else, or for a config whose ``pre_hook`` a table could not hold."""
    if isinstance(config, Mapping):
        return dict(config)
    triton = sys.modules.get("triton")
    if triton is not None and isinstance(config, triton.Config):
        if config.pre_hook is not None:
            raise ValueError(f"{where}: a config with a pre_hook ({config}); a tuned table holds plain fields, so "
                             f"kerneltune cannot run the hook: drop it or tune that kernel with a kerneltune.Kernel")
        fields = {**config.kwargs, **{k: getattr(config, k) for k in LAUNCH_OPTIONS}}
        if config.maxnreg is not None:
            fields["maxnreg"] = config.maxnreg
        return fields
    raise ValueError(f"{where}: {type(config).__name__} {config!r:.60} is not a config (a mapping of tunables to "
                     f"values, or a triton.Config)")
