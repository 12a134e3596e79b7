from pathlib import Path

from kerneltune.files.paths import REPO, RESULTS, SPACES

FIXTURES = Path(__file__).parent / "fixtures"

__all__ = ["FIXTURES", "REPO", "RESULTS", "SPACES"]
