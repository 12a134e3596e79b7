"""The CUDA backend's pure parts (CPU): which clock event reasons count as throttling."""

import pytest

from kerneltune.backends.cuda_jax import throttling


@pytest.mark.parametrize(("reasons", "throttled"), [
    ("0x0000000000000000", False),
    ("0x0000000000000001", False),  # GPU idle
    ("0x0000000000000002", False),  # applications clocks setting
    ("0x0000000000000003", False),
    ("0x0000000000000004", True),   # software power cap (run K's sustained loops)
    ("0x0000000000000005", True),
    ("0x0000000000000008", True),   # hardware slowdown
    ("0x0000000000000020", True),   # software thermal slowdown
    ("0x0000000000000040", True),   # hardware thermal slowdown
    ("[N/A]", False),
])
def test_power_cap_and_slowdowns_throttle_idle_and_app_clocks_do_not(reasons, throttled):
    assert throttling(reasons) is throttled
