"""The typed seams: what the engine, the kernels, the backends and the CLI agree on (``README.md``)."""
