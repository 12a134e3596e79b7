"""Worker processes: compile, verify and time candidates away from the CLI's process.

``python -m kerneltune.tuning.worker`` reads one JSON request per line on
stdin and answers one JSON line on its real stdout (library prints go to
stderr). The parent (:class:`WorkerProcess`) starts it in its own process
group, so a hang or a crash is ended with one ``killpg`` and a fresh worker
takes its place; a sticky device error ends the worker on purpose.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class WorkerDied(RuntimeError):
    """The worker crashed, hung past its timeout or broke the protocol."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "timeout" or "runtime"


def worker_env(cache_dir: Path | None, gpu: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # several workers share one GPU
    env["PYTHONUNBUFFERED"] = "1"
    if cache_dir is not None:
        env["KERNELTUNE_JAX_CACHE"] = str(cache_dir)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.update(extra or {})
    return env


class WorkerProcess:
    """One worker subprocess and the request/response exchange with it."""

    def __init__(self, env: Mapping[str, str], log_path: Path | None = None):
        self.env = dict(env)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()

    def start(self) -> None:
        stderr = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kerneltune.tuning.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env=self.env, start_new_session=True,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def _stderr_tail(self) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return self.log_path.read_bytes()[-1500:].decode(errors="replace")

    def request(self, req: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.kill()
            raise WorkerDied("runtime", "worker exited before taking the request: " + self._stderr_tail()) from None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerDied("timeout", f"no answer within {timeout:.0f} s; worker killed") from None
        if line is None:
            code = self.proc.wait()
            self.kill()
            why = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise WorkerDied("runtime", f"worker died ({why}): {self._stderr_tail()}")
        reply = json.loads(line)
        if reply.get("restart"):
            self.kill()
        return reply

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None


# ----------------------------------------------------------------------------- worker side

def _setup_jax_cache() -> None:
    cache = os.environ.get("KERNELTUNE_JAX_CACHE")
    if not cache:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _is_sticky(error: BaseException) -> bool:
    text = str(error).lower()
    return any(s in text for s in ("illegal", "misaligned", "launch failure", "out of memory", "resource_exhausted",
                                   "cuda_error", "xid", "unspecified launch"))


def handle(req: Mapping[str, Any]) -> dict[str, Any]:
    from kerneltune.kernels.base import load_kernel

    op = req["op"]
    if op == "stamps":
        import jax

        from kerneltune.tables.stamps import system_stamps
        from kerneltune.tuning.measure import measure_ceilings

        stamps = dict(system_stamps())
        if jax.devices()[0].platform == "gpu":
            stamps.update(measure_ceilings())
        return {"status": "ok", "stamps": stamps}
    kernel = load_kernel(req["kernel"])
    problem = kernel.problem(req["problem"])
    tiles = req["tiles"]
    t0 = time.perf_counter()
    try:
        built = kernel.build(problem, tiles)
    except Exception as e:
        return {"status": "compile", "error": _error_text(e), "compile_s": time.perf_counter() - t0}
    compile_s = time.perf_counter() - t0
    if op == "compile":
        return {"status": "ok", "compile_s": compile_s}

    from kerneltune.tuning.measure import MeasureSettings, Timing, time_callable

    settings = MeasureSettings(**req.get("settings", {}))
    try:
        inputs = kernel.make_inputs(problem, req.get("inputs", {}), int(req["seed"]))
        check = kernel.check(built, problem, inputs)
    except Exception as e:
        return {"status": "runtime", "error": _error_text(e), "compile_s": compile_s, "restart": _is_sticky(e)}
    if check.error is not None:
        return {"status": "correctness", "error": check.error, "rel_error": check.rel_error, "compile_s": compile_s}
    try:
        fn, args = kernel.timed_call(built, inputs)
        timing: Timing = time_callable(fn, args, settings, req.get("prune_above_us"))
    except Exception as e:
        return {"status": "runtime", "error": _error_text(e), "compile_s": compile_s, "restart": _is_sticky(e)}
    flops = kernel.flops(problem, inputs)
    pruned = req.get("prune_above_us") is not None and timing.median_us > req["prune_above_us"]
    return {
        "status": "pruned" if pruned else "ok",
        "timing": timing.to_dict(),
        "tflops": flops / (timing.median_us * 1e-6) / 1e12 if timing.median_us > 0 else None,
        "flops": flops,
        "rel_error": check.rel_error,
        "compile_s": compile_s,
    }


def _error_text(e: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[-4000:]


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log
    _setup_jax_cache()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            reply = handle(req)
        except Exception as e:
            reply = {"status": "runtime", "error": _error_text(e), "restart": True}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if reply.get("restart"):
            return


if __name__ == "__main__":
    main()
