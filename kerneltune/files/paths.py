"""Where the repository keeps what the tool reads and writes, found from the package's location, and the
user's cache folder."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPACES = REPO / "search_spaces"
RESULTS = REPO / "results"


SHARED_FOLDER, SHARED_FILE = 0o755, 0o644  # what a sweep writes is read by the team, whatever the umask


def make_folder(path: Path) -> None:
    """``path`` and its missing parents, each made ``SHARED_FOLDER`` whatever the umask (folders that exist are
    left as they are)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:  # made meanwhile by another process
            continue
        os.chmod(folder, SHARED_FOLDER)


def user_cache_dir() -> Path:
    """``$KERNELTUNE_CACHE``, else the per-user cache folder (``~/.cache/kerneltune`` on Linux): what is worth
    keeping between runs on one machine (the measured ceilings)."""
    env = os.environ.get("KERNELTUNE_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_cache_path("kerneltune")
