"""The files and caches kerneltune keeps on disk, and the records it writes there (``README.md``)."""
