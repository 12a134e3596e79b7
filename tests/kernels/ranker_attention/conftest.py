import pytest

from kerneltune.kernels.ranker_attention import interpret_callbacks


@pytest.fixture
def fast_interpret():
    """Mosaic GPU's interpreter as the kernel's own interpret paths run it (``api``, ``verify``)."""
    interpret_callbacks.install()
