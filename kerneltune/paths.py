"""Where the repository keeps what the tool reads and writes, found from the package's location."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPACES = REPO / "search_spaces"
RESULTS = REPO / "results"
