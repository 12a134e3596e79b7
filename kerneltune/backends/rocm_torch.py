"""AMD GPUs through torch on ROCm: HIP events, clocks from rocm-smi.

Written against torch's documented HIP build (``torch.version.hip``, ``gcnArchName``) and rocm-smi's
CSV output; never run here: no machine of this workplace has an AMD GPU. Its tests stop at the HIP
calls (``rocm``-marked)."""

from __future__ import annotations

import functools
import subprocess
from typing import Any

from kerneltune.seams.protocols import TakeBatch

from .torch_events import event_sampler

MATCHED = ("gpu", "arch", "cu_count", "gpu_count", "rocm", "torch", "flydsl", "kernel_hash")


class NoRocmGpu(RuntimeError):
    """This machine has no (or too few) AMD GPUs: the message names what it has."""


@functools.cache
def system_stamps() -> dict[str, Any]:
    import torch

    if torch.version.hip is None or torch.cuda.device_count() == 0:
        have = "a CUDA build of torch" if torch.version.hip is None else "no GPU"
        raise NoRocmGpu(f"no AMD GPU with ROCm here ({have})")
    props = torch.cuda.get_device_properties(0)
    try:
        import flydsl

        flydsl_version = getattr(flydsl, "__version__", "unknown")
    except ImportError:
        flydsl_version = "none"
    gpu = props.name
    from kerneltune.tables.stamps import device_kind

    return {"backend": "rocm-torch", "matched": list(MATCHED), "device_kind": device_kind(gpu), "gpu": gpu,
            "arch": props.gcnArchName.split(":")[0], "cu_count": props.multi_processor_count,
            "gpu_count": torch.cuda.device_count(), "rocm": torch.version.hip, "torch": torch.__version__,
            "flydsl": flydsl_version}


def rocm_clocks() -> dict[str, Any]:
    """Current shader clock and temperature of GPU 0 from rocm-smi ({} where there is none)."""
    try:
        out = subprocess.run(["rocm-smi", "--showclocks", "--showtemp", "--csv"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if len(out) < 2:
        return {}
    return dict(zip(out[0].split(","), out[1].split(","), strict=False))


# HIP errors after which the device is unusable in the same process (HIP's hipErrorIllegalAddress,
# hipErrorLaunchFailure, an HSA memory fault). Written against HIP's documented error names; never seen here.
_STICKY = ("illegal", "launch failure", "hiperrorillegaladdress", "hiperrorlaunchfailure", "memory access fault",
           "hsa_status_error", "out of memory")


def hip_error_is_sticky(error: BaseException) -> bool:
    text = str(error).lower()
    return any(s in text for s in _STICKY)


class RocmTorch:
    name = "rocm-torch"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        try:
            return dict(system_stamps())
        except (NoRocmGpu, ImportError) as e:
            return {"backend": self.name, "matched": list(MATCHED), "gpu": "none", "device_kind": "none",
                    "absent": str(e)}

    def ceilings(self) -> dict[str, float]:
        return {}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        return event_sampler(lambda: fn(*args), cold_l2)

    def worker_env(self, devices: str | None) -> dict[str, str]:
        return {} if devices is None else {"HIP_VISIBLE_DEVICES": devices}

    def prepare_worker(self, compile_cache: str | None) -> None:
        pass  # FlyDSL keeps its own compile cache

    def is_sticky(self, error: BaseException) -> bool:
        return hip_error_is_sticky(error)

    def clocks(self) -> dict[str, Any]:
        return rocm_clocks()


BACKEND = RocmTorch()
