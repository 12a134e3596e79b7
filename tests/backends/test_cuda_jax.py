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


def test_each_backend_says_which_errors_leave_its_device_unusable():
    """The worker is replaced after these (the engine asks the backend; it knows no CUDA or HIP error text)."""
    from kerneltune.backends.cuda_jax import cuda_error_is_sticky
    from kerneltune.backends.host import BACKEND as HOST
    from kerneltune.backends.rocm_torch import hip_error_is_sticky

    cuda = RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    hip = RuntimeError("HIP error: hipErrorIllegalAddress (Memory access fault by GPU node-2)")
    flaky = ValueError("a host-side error the next candidate won't see")
    assert cuda_error_is_sticky(cuda) and not cuda_error_is_sticky(flaky)
    assert hip_error_is_sticky(hip) and not hip_error_is_sticky(flaky)
    assert not HOST.is_sticky(cuda)


def test_a_workers_environment_is_its_backends():
    from kerneltune.backends.cuda_jax import BACKEND as CUDA
    from kerneltune.backends.launch_group import BACKEND as GROUP
    from kerneltune.backends.rocm_torch import BACKEND as ROCM

    assert CUDA.worker_env("1") == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "CUDA_VISIBLE_DEVICES": "1"}
    assert ROCM.worker_env("0,1,2,3") == {"HIP_VISIBLE_DEVICES": "0,1,2,3"}
    assert GROUP.worker_env("0,1") == {"CUDA_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}
    assert CUDA.worker_env(None) == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
