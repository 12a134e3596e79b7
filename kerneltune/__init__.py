"""kerneltune: tune, verify and ship GPU kernels with their best configuration for every GPU and shape."""

__version__ = "0.1.0"
