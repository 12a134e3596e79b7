from kerneltune.paths import REPO, RESULTS, SPACES

__all__ = ["REPO", "RESULTS", "SPACES"]
