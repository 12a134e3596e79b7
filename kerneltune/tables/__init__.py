"""Tuned tables at run time: system stamps, atomic storage, and lookup with fallback."""
