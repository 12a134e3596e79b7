"""What each platform brings: device discovery and kind, the stamps tables are matched on, the timer,
clocks and cold-L2 flushing. Registered by name in ``kerneltune.seams.registry.BACKENDS``; the engine
reaches them only through worker processes and the ``Backend`` protocol."""
