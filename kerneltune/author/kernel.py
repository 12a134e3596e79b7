"""Your own kernel, tuned: subclass :class:`Kernel`, write ``build``, ``inputs`` and ``reference``.

The class below is the whole engine protocol (``kerneltune.seams.protocols.Kernel``) with a default for every
member a kernel author should not have to write: the problem type (a bucket's fields), the bucket (the
problem itself), the source hash (the defining module and its space file), the check (outputs poisoned
with NaN, compared with the float64 reference under the output dtype's tolerance), the timed call
(through the framework's timer) and the release. The guide's "Your own kernel" page walks through it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import re
import sys
import time
import tomllib
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from kerneltune.seams.protocols import Capability, CheckResult
from kerneltune.seams.registry import load_backend
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.stamps import source_hash
from kerneltune.tuning.space import Space, SpaceError, space_from_data

from .check import compare
from .fields import Config, Problem
from .frameworks import FRAMEWORKS, Framework
from .listed import config_fields

log = logging.getLogger("kerneltune.tables")


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


class _Inputs:
    """A candidate's arguments, with what the reference needs kept from before any kernel ran."""

    def __init__(self, args: tuple[Any, ...], key: tuple[Any, ...]):
        self.args, self.key = args, key


class Kernel:
    """A kernel of one's own. Set ``params`` and ``buckets`` (or ``space``, a TOML file beside the module),
    write ``build``, ``inputs`` and ``reference``; ``refuses``, ``flops`` and ``heuristic`` are optional.
    An instance at module level is what ``kerneltune sweep path/to/file.py`` tunes, and its ``tuned(...)``
    is the run-time call."""

    name: ClassVar[str] = ""  # the tables' name for it; default: the class name in kebab case
    framework: ClassVar[str] = ""  # "jax", "torch" or "numpy"; default: the one the defining module imports
    params: ClassVar[Mapping[str, Any]] = {}  # tunable -> [values] or {"range": [lo, hi]} (or [lo, hi, step])
    configs: ClassVar[Sequence[Any]] = ()  # or a list of whole configs: mappings, or triton.Config (fn.configs)
    constraints: ClassVar[Sequence[str]] = ()  # expressions over params and problem fields, as in a space file
    buckets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}  # bucket name -> problem fields
    space: ClassVar[str | None] = None  # a space file (relative to the module) instead of the three above
    hard_fields: ClassVar[tuple[str, ...] | None] = None  # a config never crosses these (default: non-numbers)
    tolerance: ClassVar[float | None] = None  # the check's bound (default: the output dtype's; ``check.py``)
    sources: ClassVar[Sequence[str]] = ()  # more files (relative to the module) whose text the tables depend on
    # Whether it runs in an interpreter on a CPU, where its times say nothing of its speed (``void_timings``):
    # None judges by the module's imports (Triton's and Pallas' kernels do; a NumPy, JAX or torch one does not).
    interpreted: ClassVar[bool | None] = None

    # The engine protocol's constants.
    devices = 1
    capabilities = frozenset({Capability.OWN_SPACE, Capability.VOID_TIMINGS})
    config_defaults: Mapping[str, Any] = {}
    gated_params: tuple[str, ...] = ()

    _WRAPPED = ("build", "refuses", "heuristic", "bucket", "flops")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = _kebab(cls.__name__)
        # The engine hands plain dicts; an author's method gets a Problem and a Config.
        for hook in cls._WRAPPED:
            if hook in cls.__dict__:
                setattr(cls, hook, _typed(hook, cls.__dict__[hook]))

    # ------------------------------------------------------------------ what an author writes

    def build(self, problem: Problem, config: Config) -> Callable[..., Any]:
        """The kernel for this problem at this config: a callable taking ``inputs(...)``'s arrays and
        returning the output array(s) (for a kernel that writes into an argument: that argument)."""
        raise NotImplementedError(f"{type(self).__name__}.build(problem, config) is not written")

    def inputs(self, problem: Problem, seed: int) -> tuple[Any, ...]:
        """Fresh random arguments of the kernel for ``problem``, drawn from ``seed``."""
        raise NotImplementedError(f"{type(self).__name__}.inputs(problem, seed) is not written")

    def reference(self, *inputs: np.ndarray) -> Any:
        """The right answer, from the inputs as NumPy arrays (floating ones in float64)."""
        raise NotImplementedError(f"{type(self).__name__}.reference(*inputs) is not written")

    def refuses(self, problem: Problem, config: Config) -> str | None:
        """Why this config cannot run this problem, or None: it is never compiled, nor returned by ``tuned``."""
        return None

    def flops(self, problem: Problem, inputs: Any = None) -> float:
        """Floating-point operations of one call (0: rates are not reported). Write it as ``flops(self, p)``."""
        return 0.0

    def heuristic(self, problem: Problem) -> Mapping[str, Any]:
        """The config used where no tuned entry serves; default: the space's first that runs the problem."""
        return self._first_runnable(problem)

    def bucket(self, problem: Problem) -> Mapping[str, Any]:
        """The fields a tuned table is keyed by; default: the problem's own."""
        return dict(problem)

    # ------------------------------------------------------------------ the run-time call

    def tuned(self, problem: Mapping[str, Any] | None = None, /, **fields: Any) -> Config:
        """The config to launch ``problem`` with on this device: its tuned entry, else the nearest tuned
        bucket's (winner, then its fallbacks), else the heuristic; never one the problem refuses (the space's
        constraints and ``refuses``). A miss is logged once. Tables: the user's folder over the shipped one,
        or ``KERNELTUNE_TABLES``."""
        p = self.problem({**(problem or {}), **fields})
        found = tuned_config(self.name, dict(self.bucket(p)), self.source_hash(), self.hard_bucket_fields,
                             load_backend(self.backend).stamps(),
                             refuses=lambda entry: self._why_not(p, entry.config), one_line=True,
                             problem=self.problem_dict(p))
        if found is not None:
            return Config(found)
        return Config(self._runnable_heuristic(p))

    # ------------------------------------------------------------------ the engine protocol

    @functools.cached_property
    def _framework(self) -> Framework:
        name = self.framework or self._inferred_framework()
        if name not in FRAMEWORKS:
            raise ValueError(f"{type(self).__name__}.framework = {name!r}; one of {', '.join(FRAMEWORKS)}")
        return FRAMEWORKS[name]

    def _inferred_framework(self) -> str:
        """The framework the kernel's own ``build`` and ``inputs`` use (the modules and objects their code names),
        not the module's imports (a helper module may import torch for a NumPy kernel, or none for a torch one).
        Where they name none, or more than one, the guess is said in one line with how to set it."""
        used = frameworks_used(type(self))
        if len(used) == 1:
            return next(iter(used))
        module = vars(sys.modules[type(self).__module__])
        guess = next((f for f in ("torch", "jax") if f in module), "numpy")
        why = (f"its build and inputs use {' and '.join(sorted(used))}" if used else
               "its build and inputs name no array framework")
        log.warning("%s: framework guessed as %r from its module's imports (%s); set framework = \"torch\", "
                    "\"jax\" or \"numpy\" on %s to say which", self.name, guess, why, type(self).__name__)
        return guess

    @property
    def backend(self) -> str:  # type: ignore[override]
        return self._framework.backend

    def _module_file(self) -> Path:
        return Path(sys.modules[type(self).__module__].__file__ or ".").resolve()

    @functools.cached_property
    def _space(self) -> tuple[str, dict[str, Any]]:
        if self.space is not None:
            path = self._module_file().parent / self.space
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise SpaceError(f"{path}: {type(self).__name__}.space cannot be read ({e})") from None
            return str(path), {"kernel": self.name, **data}
        where = f"{self._module_file()}:{type(self).__name__}"
        if not self.params and not self.configs:
            raise SpaceError(f"{where}: set params (or configs) and buckets, or space = 'file.toml'")
        if self.params and self.configs:
            raise SpaceError(f"{where}: set params (every combination of values) or configs (a list), not both")
        try:
            space = {"params": dict(self.params)} if self.params else {
                "configs": [config_fields(c, f"{where}.configs[{i}]") for i, c in enumerate(self.configs)]}
        except ValueError as e:
            raise SpaceError(str(e)) from None
        return where, {"kernel": self.name, **space, "constraints": [{"expr": e} for e in self.constraints],
                       "buckets": [{"name": n, "problem": dict(p)} for n, p in self.buckets.items()]}

    def own_space(self) -> tuple[str, Mapping[str, Any]]:
        return self._space

    @functools.cached_property
    def _parsed_space(self) -> Space:
        where, data = self._space
        return space_from_data(data, Path(where), set(self.tunables), set(self.problem_fields), self.name)

    @functools.cached_property
    def tunables(self) -> frozenset[str]:  # type: ignore[override]
        data = self._space[1]
        params, listed = data.get("params"), data.get("configs")
        if isinstance(listed, list):  # the fields of every listed config (the space names one that differs)
            return frozenset(k for c in listed if isinstance(c, Mapping) for k in c)
        return frozenset(params) if isinstance(params, Mapping) else frozenset()

    @functools.cached_property
    def _bucket_problems(self) -> list[Mapping[str, Any]]:
        """The buckets' problem tables, as the space gives them (its own checks name a malformed one)."""
        buckets = self._space[1].get("buckets")
        return [b["problem"] for b in buckets if isinstance(b, Mapping) and isinstance(b.get("problem"), Mapping)
                ] if isinstance(buckets, list) else []

    @functools.cached_property
    def problem_fields(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset(k for problem in self._bucket_problems for k in problem)

    @functools.cached_property
    def hard_bucket_fields(self) -> tuple[str, ...]:  # type: ignore[override]
        if self.hard_fields is not None:
            return tuple(self.hard_fields)
        numbers = {k for problem in self._bucket_problems for k, v in problem.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        return tuple(sorted(self.problem_fields - numbers))

    def problem(self, fields: Mapping[str, Any]) -> Problem:
        given, want = set(fields), set(self.problem_fields)
        if given != want:
            missing, extra = sorted(want - given), sorted(given - want)
            raise ValueError(f"{self.name}: a problem has the fields {sorted(want)}"
                             + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
        return Problem(fields)

    def problem_dict(self, problem: Problem) -> dict[str, Any]:
        return dict(problem)

    def infeasibility(self, problem: Problem, config: Mapping[str, Any]) -> str | None:
        try:
            why = self.refuses(problem, Config(config))
        except Exception as e:  # the author's code: its failure is this config's refusal, named
            return f"{type(self).__name__}.refuses raised {type(e).__name__}: {e}"
        return None if not why else "refused" if why is True else str(why)

    def _why_not(self, problem: Problem, config: Mapping[str, Any]) -> str | None:
        if set(config) != set(self.tunables):
            return f"config fields {sorted(config)} are not the space's {sorted(self.tunables)}"
        try:
            if (why := self._parsed_space.excluded_by(config, problem)) is not None:
                return why
        except (SpaceError, NameError) as e:
            return str(e)
        return self.infeasibility(problem, config)

    def _first_runnable(self, problem: Problem) -> dict[str, Any]:
        for config in self._parsed_space.configs(problem):
            if self.infeasibility(problem, config) is None:
                return config
        raise ValueError(f"{self.name}: no config of {self._space[0]} runs {problem}")

    def _runnable_heuristic(self, problem: Problem) -> dict[str, Any]:
        config = dict(self.heuristic(problem))
        why = self._why_not(problem, config)
        if why is None:
            return config
        fallback = self._first_runnable(problem)
        log.warning("%s: the heuristic config %s does not run %s (%s); using %s", self.name, config, problem, why,
                    fallback)
        return fallback

    def source_hash(self) -> str:
        return self._source_hash

    @functools.cached_property
    def _source_hash(self) -> str:
        """Of the files this process loaded the kernel from, read once: ``tuned`` asks at every launch, and the
        code that runs is the code imported, whatever the files say later."""
        folder = self._module_file().parent
        files = [self._module_file(), *(folder / s for s in self.sources)]
        if self.space is not None:
            files.append(folder / self.space)
        return source_hash(files)

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        """Wherever its framework runs (the device is in the stamps, and tables are kept per device), but a
        Triton kernel on a machine with no GPU: there only Triton's interpreter runs it."""
        if (stamps.get("device_kind") == "cpu" and "triton" in packages_used(type(self))
                and os.environ.get("TRITON_INTERPRET", "").strip() in ("", "0")):
            return "a GPU Triton has a driver for, or Triton's interpreter on the CPU (TRITON_INTERPRET=1)"
        return None

    def void_timings(self, stamps: Mapping[str, Any]) -> str | None:
        """Why times on the CPU these stamps name say nothing of this kernel's speed: it runs there in Triton's or
        Pallas' interpreter (``interpreted``). None on a GPU, and for a kernel that runs natively on the CPU."""
        if stamps.get("device_kind") != "cpu" or self.interpreted is False:
            return None
        names = {m.__name__ for m in vars(sys.modules[type(self).__module__]).values() if isinstance(m, ModuleType)}
        found = [who for who, prefix in (("Triton's", "triton"), ("Pallas'", "jax.experimental.pallas"))
                 if any(n == prefix or n.startswith(prefix + ".") for n in names)]
        if not found and not self.interpreted:
            return None
        which = f"{found[0]} interpreter" if found else "an interpreter"
        return (f"{self.name} runs in {which} on this CPU, so its times here say nothing of its speed on the GPU it "
                f"is written for")

    def make_inputs(self, problem: Problem, inputs_spec: Mapping[str, Any], seed: int) -> _Inputs:
        args = self.inputs(problem, seed)
        return _Inputs(tuple(args) if isinstance(args, tuple | list) else (args,), (problem, seed))

    @functools.cached_property
    def _references(self) -> dict[tuple[Any, ...], tuple[np.ndarray, ...]]:
        return {}

    def _reference_of(self, inputs: _Inputs) -> tuple[np.ndarray, ...]:
        """Once per problem and seed in a worker: every candidate of a bucket is checked on the same inputs."""
        if inputs.key not in self._references:
            fw = self._framework
            with np.errstate(invalid="ignore"):  # an output argument's unwritten memory may hold any bits
                host = [(fw.to_host(a).astype(np.float64) if fw.is_float(a) else fw.to_host(a)) if fw.is_array(a)
                        else a for a in inputs.args]
            ref = self.reference(*host)
            self._references.clear()
            self._references[inputs.key] = tuple(np.asarray(fw.to_host(r)) for r in _as_tuple(ref))
        return self._references[inputs.key]

    def check(self, built: Any, problem: Problem, inputs: _Inputs) -> CheckResult:
        """Outputs against the reference: a first call finds the outputs (and compiles), then the outputs an
        argument holds are filled with NaN, and NaN is left where fresh outputs will be allocated, before the
        judged call."""
        fw = self._framework
        started = time.perf_counter()
        ref = self._reference_of(inputs)
        reference_s = time.perf_counter() - started
        first = _as_tuple(built(*inputs.args))
        fw.sync(first)
        if not first or not all(fw.is_array(o) for o in first):
            return CheckResult("build's callable must return its output array(s) (a kernel that writes into an "
                               "argument returns that argument)", reference_s=reference_s)
        specs = [fw.spec(o) for o in first]
        for a in inputs.args:
            if any(a is o for o in first):
                fw.nan_fill(a)
        del first
        fw.poison(specs)
        outputs = _as_tuple(built(*inputs.args))
        fw.sync(outputs)
        error, worst = compare([fw.to_host(o) for o in outputs], ref, [fw.dtype_name(o) for o in outputs],
                               self.tolerance)
        return CheckResult(error, worst, reference_s=reference_s)

    def timed_call(self, built: Any, inputs: _Inputs) -> tuple[Any, tuple[Any, ...]]:
        return built, inputs.args

    def release(self, built: Any) -> None:
        pass


_FRAMEWORK_OF = {"torch": "torch", "triton": "torch", "jax": "jax", "jaxlib": "jax", "numpy": "numpy"}


def frameworks_used(cls: type) -> set[str]:
    """The array frameworks (torch, jax, numpy) that ``cls``'s ``build`` and ``inputs`` name (``packages_used``).
    NumPy counts only where nothing else is named (a torch kernel's inputs may use NumPy too)."""
    found = {_FRAMEWORK_OF[p] for p in packages_used(cls) if p in _FRAMEWORK_OF}
    return found - {"numpy"} or found


def packages_used(cls: type) -> set[str]:
    """The top packages of the modules, functions and objects (a Triton kernel) that the code of ``cls``'s
    ``build`` and ``inputs``, nested functions included, reads from its globals."""
    found = set()
    for hook in ("build", "inputs"):
        owner = next((k for k in cls.__mro__ if hook in k.__dict__), Kernel)
        fn = inspect.unwrap(owner.__dict__[hook]) if owner is not Kernel else None
        if not isinstance(fn, types.FunctionType):
            continue
        codes, names = [fn.__code__], set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        found.update(_package_of(fn.__globals__.get(name)) for name in names if name in fn.__globals__)
    return found


def _package_of(value: Any) -> str:
    """The top package a global comes from: a module's own, a function's or class's module's, else its type's
    (a Triton kernel is a ``triton.runtime`` object)."""
    if isinstance(value, types.ModuleType):
        where = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        where = value.__module__
    else:
        where = type(value).__module__
    return (where or "").split(".")[0]


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, tuple | list) else () if x is None else (x,)


def _typed(hook: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """An author's hook, called by the engine with plain dicts, given a Problem and a Config."""
    if hook == "flops":
        @functools.wraps(method)
        def flops(self: Kernel, problem: Mapping[str, Any], inputs: Any = None) -> float:
            return float(method(self, Problem(problem)))
        return flops
    if hook in ("heuristic", "bucket"):
        @functools.wraps(method)
        def of_problem(self: Kernel, problem: Mapping[str, Any]) -> dict[str, Any]:
            return dict(method(self, Problem(problem)))
        return of_problem

    @functools.wraps(method)
    def of_config(self: Kernel, problem: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
        return method(self, Problem(problem), Config(config))
    return of_config
