"""A Triton ``@triton.autotune`` kernel, tuned and served by kerneltune without a rewrite.

``kerneltune sweep file.py:fn``, where ``fn`` is a Triton ``Autotuner``, adopts it (``adopt``): its configs are
the space (``configs = fn.configs``), its key and the dtypes of its tensor arguments (which Triton's own cache keys
on too) the bucket, and a call recorded in the miss ledger the problem: each argument's shape, strides and dtype, or
its value, and the grid each config launches. The check is the user's reference where given (``reference=``:
a NumPy function of the kernel's arguments that writes its outputs as the kernel does), else agreement with the
first config's outputs, the weaker check: it proves the configs agree, not that any is right (``check_note``).

At run time one line around the kernel reads the tuned tables: ``fn = kerneltune.autotuned(fn)``. ``fn[grid](...)``
then launches the config tuned for the call's bucket (else the nearest bucket's; where none serves, Triton's own
autotuning, or under Triton's interpreter, which cannot time, the first config) and, with recording on, counts the
call in the ledger.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.seams.protocols import CheckResult
from kerneltune.seams.registry import load_backend
from kerneltune.tables.lookup import tuned_config
from kerneltune.tuning.space import SpaceError

from .check import compare
from .fields import Config, Problem
from .kernel import Kernel, _Inputs, log
from .listed import config_fields

CALL = "call"  # the problem field holding a recorded call's arguments and grids (JSON)
DTYPES = "dtypes"  # the problem field of its tensor arguments' dtypes, in order
WEAKER = "error_vs_first_config"  # the accuracy figure of a check against the first config, not a reference
MAX_CALLS = 4096  # argument signatures a process keeps the problem of
NEEDS = "a GPU Triton has a driver for, or Triton's interpreter on the CPU (TRITON_INTERPRET=1)"


def interpreting() -> bool:
    """Whether Triton runs its interpreter here (``TRITON_INTERPRET=1``): it cannot time, so its autotuner cannot."""
    return os.environ.get("TRITON_INTERPRET", "").strip() not in ("", "0")


def _torch() -> Any:
    import torch

    return torch


def _plain_name(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")[:64] or "triton-kernel"


class Autotuned(Kernel):
    """A Triton autotuner as a kerneltune kernel (the engine's side) and as the kernel to launch (``fn[grid]``)."""

    framework = "torch"

    def __init__(self, fn: Any, reference: Callable[..., Any] | None = None, name: str | None = None):
        triton = sys.modules.get("triton")
        if triton is None or not isinstance(fn, triton.runtime.autotuner.Autotuner):
            raise TypeError(f"kerneltune.autotuned: {fn!r:.60} is not a Triton @triton.autotune kernel")
        self.autotuner, self.jit, self.base = fn, fn.fn, fn.base_fn
        self.name = name or _plain_name(self.base.__name__)  # type: ignore[misc]
        self.keys = tuple(fn.keys)
        self.arg_names = tuple(fn.arg_names)
        self.user_reference = reference
        where = f"{self.base.__code__.co_filename}:{self.base.__name__}"
        try:
            whole = [config_fields(c, f"{where}.configs[{i}]") for i, c in enumerate(fn.configs)]
        except ValueError as e:
            raise SpaceError(str(e)) from None
        # The fields every config sets alike (num_ctas=1, say) are launched, not tuned: a table names what differs.
        varying = [k for k in whole[0] if len({repr(c.get(k)) for c in whole}) > 1] or list(whole[0])
        self.fixed = {k: v for k, v in whole[0].items() if k not in varying}
        self.listed = [{k: c[k] for k in varying if k in c} for c in whole]
        self.zeroed = tuple(fn.reset_to_zero)
        self._calls: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"kerneltune.autotuned({self.base.__name__})"

    # ------------------------------------------------------------------ the space and the problem

    @functools.cached_property
    def _space(self) -> tuple[str, dict[str, Any]]:
        return f"{self._module_file()}:{self.base.__name__}", {"kernel": self.name, "configs": self.listed}

    @functools.cached_property
    def problem_fields(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset({*self.keys, DTYPES, CALL})

    @property
    def hard_bucket_fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (DTYPES,)

    def _module_file(self) -> Path:
        return Path(inspect.getsourcefile(self.base) or self.base.__code__.co_filename).resolve()

    def bucket(self, problem: Problem) -> Mapping[str, Any]:
        """The key's fields in the key's order, then the dtypes: what Triton's own cache keys a call by."""
        return {**{k: problem[k] for k in self.keys if k in problem}, DTYPES: problem[DTYPES]}

    def heuristic(self, problem: Problem) -> Mapping[str, Any]:
        return self.listed[0]

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        if stamps.get("device_kind") == "cpu" and not interpreting():
            return NEEDS
        return None

    def void_timings(self, stamps: Mapping[str, Any]) -> str | None:
        """On a CPU a Triton kernel runs only in Triton's interpreter, whose times say nothing of its speed (the
        class's judgement looks at its module's imports, here kerneltune's, not the user's)."""
        if stamps.get("device_kind") != "cpu":
            return None
        return (f"{self.name} runs in Triton's interpreter on this CPU, so its times here say nothing of its speed "
                f"on the GPU it is written for")

    # ------------------------------------------------------------------ a candidate

    def build(self, problem: Problem, config: Config) -> Callable[..., Any]:
        call = json.loads(problem[CALL])
        index = self.listed.index(dict(config))
        grid = tuple(call["grids"][index])
        names = [a["name"] for a in call["args"]]
        zeroed = [i for i, n in enumerate(names) if n in self.zeroed]
        torch = _torch()

        def launch(*args: Any) -> tuple[Any, ...]:
            for i in zeroed:  # what the autotuner resets before each of its runs (reset_to_zero)
                args[i].zero_()
            self.jit[grid](**dict(zip(names, args, strict=True)), **self.fixed, **config)
            return tuple(a for a in args if isinstance(a, torch.Tensor))
        return launch

    def inputs(self, problem: Problem, seed: int) -> tuple[Any, ...]:
        """The recorded call's arguments: tensors of its shapes, strides and dtypes (floating ones random, integer
        and boolean ones zero, as no value of theirs was recorded), scalars as they were."""
        torch = _torch()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        generator = torch.Generator().manual_seed(seed)
        out: list[Any] = []
        for arg in json.loads(problem[CALL])["args"]:
            if "tensor" not in arg:
                out.append(arg["value"])
                continue
            t = arg["tensor"]
            dtype = getattr(torch, t["dtype"])
            span = 0 if 0 in t["shape"] else 1 + sum((n - 1) * s for n, s in zip(t["shape"], t["stride"], strict=True))
            flat = (torch.randn(span, generator=generator).to(dtype) if dtype.is_floating_point
                    else torch.zeros(span, dtype=dtype))
            out.append(torch.as_strided(flat.to(device), t["shape"], t["stride"]))
        return tuple(out)

    def make_inputs(self, problem: Problem, inputs_spec: Mapping[str, Any], seed: int) -> _Inputs:
        args = self.inputs(problem, seed)
        made = _Inputs(args, (problem, seed))
        made.pristine = tuple(a.clone() if self._is_tensor(a) else a for a in args)  # type: ignore[attr-defined]
        return made

    @staticmethod
    def _is_tensor(x: Any) -> bool:
        return isinstance(x, _torch().Tensor)

    # ------------------------------------------------------------------ the check

    def check(self, built: Any, problem: Problem, inputs: _Inputs) -> CheckResult:
        """Every tensor argument after the call against the expected state (the reference's, else the first
        config's), the outputs poisoned with NaN first, so an element never written fails."""
        started = time.perf_counter()
        expected, written = self._expected(problem, inputs)
        reference_s = time.perf_counter() - started
        built(*inputs.args)  # the first call compiles
        self._restore(inputs.args, inputs.pristine, written)  # type: ignore[attr-defined]
        built(*inputs.args)
        self._framework.sync(None)
        got = [self._framework.to_host(a) for a in inputs.args if self._is_tensor(a)]
        error, worst = compare(*_cared(got, expected), [self._framework.dtype_name(a) for a in inputs.args
                                                        if self._is_tensor(a)], self.tolerance)
        weak = {} if self.user_reference is not None else {WEAKER: worst}
        return CheckResult(error, worst, accuracy=weak, reference_s=reference_s)

    def _restore(self, args: tuple[Any, ...], pristine: tuple[Any, ...], written: frozenset[int]) -> None:
        """The arguments as drawn, and NaN in every floating tensor the expected run wrote (its outputs)."""
        for i, (a, p) in enumerate(zip(args, pristine, strict=True)):
            if self._is_tensor(a):
                a.copy_(p)
                if i in written and a.is_floating_point():
                    a.fill_(float("nan"))

    @functools.cached_property
    def _expected_cache(self) -> dict[Any, tuple[list[np.ndarray], frozenset[int]]]:
        return {}

    def _expected(self, problem: Problem, inputs: _Inputs) -> tuple[list[np.ndarray], frozenset[int]]:
        """The tensors' state after the reference (or the first config) ran on the inputs with its outputs poisoned,
        and which arguments it wrote; once per inputs in a worker."""
        if inputs.key not in self._expected_cache:
            self._expected_cache.clear()
            pristine = inputs.pristine  # type: ignore[attr-defined]
            run = self._run_reference if self.user_reference is not None else self._run_first_config(problem)
            before = run(pristine, frozenset())
            host = [self._framework.to_host(p) for p in pristine if self._is_tensor(p)]
            tensors = [i for i, p in enumerate(pristine) if self._is_tensor(p)]
            written = frozenset(i for i, b, h in zip(tensors, before, host, strict=True)
                                if not np.array_equal(b, h, equal_nan=True))
            if not written:
                raise ValueError(f"{self.name}: the {'reference' if self.user_reference else 'first config'} wrote "
                                 f"none of the call's tensors; nothing to check a config against")
            self._expected_cache[inputs.key] = (run(pristine, written), written)
        return self._expected_cache[inputs.key]

    def _run_reference(self, pristine: tuple[Any, ...], written: frozenset[int]) -> list[np.ndarray]:
        fw = self._framework
        host = []
        for i, p in enumerate(pristine):
            if not self._is_tensor(p):
                host.append(p)
                continue
            a = np.array(fw.to_host(p), dtype=np.float64 if p.is_floating_point() else None)
            if i in written:
                a[...] = np.nan
            host.append(a)
        assert self.user_reference is not None
        self.user_reference(*host)
        return [h for h, p in zip(host, pristine, strict=True) if self._is_tensor(p)]

    def _run_first_config(self, problem: Problem) -> Callable[[tuple[Any, ...], frozenset[int]], list[np.ndarray]]:
        first = self.build(problem, Config(self.listed[0]))

        def run(pristine: tuple[Any, ...], written: frozenset[int]) -> list[np.ndarray]:
            args = tuple(p.clone() if self._is_tensor(p) else p for p in pristine)
            self._restore(args, pristine, written)
            first(*args)
            self._framework.sync(None)
            return [self._framework.to_host(a) for a in args if self._is_tensor(a)]
        return run

    def reference(self, *inputs: np.ndarray) -> Any:  # the check above computes its own expectation
        raise NotImplementedError

    # ------------------------------------------------------------------ the launch

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch with the tuned config of the call's bucket (the runtime's lookup, recorded where recording is on)."""
        problem = self._problem_of(args, kwargs, grid)
        config = None
        if problem is not None:
            p = Problem(problem)
            config = tuned_config(self.name, dict(self.bucket(p)), self.source_hash(), self.hard_bucket_fields,
                                  load_backend(self.backend).stamps(),
                                  refuses=lambda entry: self._why_not(p, entry.config), one_line=True,
                                  problem=problem)
        if config is None:
            if not interpreting():
                return self.autotuner.run(*args, grid=grid, warmup=warmup, **kwargs)
            config = self.listed[0]
        return self.jit.run(*args, grid=grid, warmup=warmup, **kwargs, **self.fixed, **config)

    def _problem_of(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> dict[str, Any] | None:
        """The call as a problem (its key's values, its tensors' dtypes, the call itself), kept per argument
        signature; None (said once) for a call that cannot be recorded (an argument JSON cannot hold)."""
        torch = _torch()
        named = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        signature = tuple((k, (tuple(v.shape), tuple(v.stride()), v.dtype) if isinstance(v, torch.Tensor) else v)
                          for k, v in named.items())
        try:
            return self._calls[signature][0]
        except KeyError:
            pass
        except TypeError:  # an unhashable argument
            return None
        try:
            problem = self._call_problem(named, grid)
        except Exception as e:  # a grid that raises, an argument JSON cannot hold: never raised into the launch
            log.warning("%s: a call not looked up in the tuned tables (%s); Triton's autotuner serves it", self.name,
                        e)
            return None
        if len(self._calls) >= MAX_CALLS:  # a scalar argument new at every call (a seed): bounded memory
            self._calls.clear()
        self._calls[signature] = (problem, named)
        return problem

    def _call_problem(self, named: dict[str, Any], grid: Any) -> dict[str, Any]:
        torch = _torch()
        args, dtypes = [], []
        for name, value in named.items():
            if isinstance(value, torch.Tensor):
                dtype = str(value.dtype).removeprefix("torch.")
                dtypes.append(dtype)
                args.append({"name": name, "tensor": {"shape": list(value.shape), "stride": list(value.stride()),
                                                      "dtype": dtype}})
            elif value is None or type(value) in (int, float, bool, str):
                args.append({"name": name, "value": value})
            else:
                raise TypeError(f"argument {name} is a {type(value).__name__}, which a recorded call cannot hold")
        grids = [[int(g) for g in (grid({**named, **self.fixed, **c}) if callable(grid) else grid)]
                 for c in self.listed]
        key = {}
        for k in self.keys:
            if k in named:
                v = named[k]
                if type(v) not in (int, float, bool, str):
                    raise TypeError(f"key {k} is a {type(v).__name__}, not a number or a string")
                key[k] = v
        call = json.dumps({"args": args, "grids": grids}, sort_keys=True, separators=(",", ":"))
        return {**key, DTYPES: " ".join(dtypes), CALL: call}


def autotuned(fn: Any, reference: Callable[..., Any] | None = None, name: str | None = None) -> Autotuned:
    """``fn`` (a ``@triton.autotune`` kernel) launched with kerneltune's tuned configs: ``fn = autotuned(fn)``.
    ``reference``: a NumPy function with the kernel's arguments (floating tensors as float64 arrays) that writes
    the outputs as the kernel does; without one, configs are checked against the first config (the weaker check)."""
    return Autotuned(fn, reference, name)


def adopt(fn: Any) -> Autotuned:
    """The registry's adopter of a bare Triton autotuner named on the command line."""
    return Autotuned(fn)


def check_note(kernel: Any) -> str | None:
    """The line every report of ``kernel`` carries where its check is the weaker one."""
    if isinstance(kernel, Autotuned) and kernel.user_reference is None:
        return (f"{kernel.name}: checked against its first config's outputs ({WEAKER} in the journal and tables), "
                f"not a reference: a weaker check that proves the configs agree, not that any is right; "
                f"kerneltune.autotuned({kernel.base.__name__}, reference=...) gives one")
    return None


def _cared(got: list[np.ndarray], expected: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The outputs and the expectation, with the elements the expected run left unwritten (NaN there, as
    poisoned) out of the comparison: what a config writes there is not the kernel's result."""
    a, b = [], []
    for g, e in zip(got, expected, strict=True):
        g, e = np.array(g, dtype=np.float64 if g.dtype.kind == "f" else g.dtype), np.array(e)
        if e.dtype.kind == "f":
            free = np.isnan(e)
            g = np.where(free, 0.0, g.astype(np.float64))
            e = np.where(free, 0.0, e)
        a.append(g)
        b.append(e)
    return a, b
