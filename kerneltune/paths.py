"""Where the repository keeps what the tool reads and writes, found from the package's location, and the
user's cache folder."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPACES = REPO / "search_spaces"
RESULTS = REPO / "results"


def user_cache_dir() -> Path:
    """``$KERNELTUNE_CACHE``, else the per-user cache folder (``~/.cache/kerneltune`` on Linux): what is worth
    keeping between runs on one machine (the measured ceilings)."""
    env = os.environ.get("KERNELTUNE_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("kerneltune")
