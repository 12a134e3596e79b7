"""A third kernel that lives entirely outside the package: a NumPy blocked matrix-vector product on the
CPU, with its own backend. It plugs into the engine through ``kerneltune.seams.protocols`` and import paths
alone, which is what the end-to-end test proves."""
