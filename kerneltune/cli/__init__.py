"""The command line: ``app`` parses (``app.py``), ``commands`` runs, ``render`` prints, ``failures`` ends."""

from .app import app

__all__ = ["app"]
