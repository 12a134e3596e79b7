"""Your own kernel, tuned: subclass :class:`Kernel`, write ``build``, ``inputs`` and ``reference``.

The class below is the whole engine protocol (``kerneltune.protocols.Kernel``) with a default for every
member a kernel author should not have to write: the problem type (a bucket's fields), the bucket (the
problem itself), the source hash (the defining module and its space file), the check (outputs poisoned
with NaN, compared with the float64 reference under the output dtype's tolerance), the timed call
(through the framework's timer) and the release. The guide's "Your own kernel" page walks through it.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kerneltune.protocols import Capability, CheckResult
from kerneltune.registry import load_backend
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.stamps import source_hash
from kerneltune.tuning.space import Space, SpaceError, space_from_data

from .check import compare
from .fields import Config, Problem
from .frameworks import FRAMEWORKS, Framework

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
    constraints: ClassVar[Sequence[str]] = ()  # expressions over params and problem fields, as in a space file
    buckets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}  # bucket name -> problem fields
    space: ClassVar[str | None] = None  # a space file (relative to the module) instead of the three above
    hard_fields: ClassVar[tuple[str, ...] | None] = None  # a config never crosses these (default: non-numbers)
    tolerance: ClassVar[float | None] = None  # the check's bound (default: the output dtype's; ``check.py``)
    sources: ClassVar[Sequence[str]] = ()  # more files (relative to the module) whose text the tables depend on

    # The engine protocol's constants.
    devices = 1
    capabilities = frozenset({Capability.OWN_SPACE})
    tile_defaults: Mapping[str, Any] = {}
    gated_tiles: tuple[str, ...] = ()

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
                             refuses=lambda entry: self._why_not(p, entry["config"]), one_line=True,
                             problem=self.problem_dict(p))
        if found is not None:
            return Config(found)
        return Config(self._runnable_heuristic(p))

    # ------------------------------------------------------------------ the engine protocol

    @functools.cached_property
    def _framework(self) -> Framework:
        name = self.framework or self._imported_framework()
        if name not in FRAMEWORKS:
            raise ValueError(f"{type(self).__name__}.framework = {name!r}; one of {', '.join(FRAMEWORKS)}")
        return FRAMEWORKS[name]

    def _imported_framework(self) -> str:
        module = vars(sys.modules[type(self).__module__])
        return next((f for f in ("torch", "jax") if f in module), "numpy")

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
        if not self.params:
            raise SpaceError(f"{where}: set params and buckets, or space = 'file.toml'")
        return where, {"kernel": self.name, "params": dict(self.params),
                       "constraints": [{"expr": e} for e in self.constraints],
                       "buckets": [{"name": n, "problem": dict(p)} for n, p in self.buckets.items()]}

    def own_space(self) -> tuple[str, Mapping[str, Any]]:
        return self._space

    @functools.cached_property
    def _parsed_space(self) -> Space:
        where, data = self._space
        return space_from_data(data, Path(where), set(self.tunables), set(self.problem_fields), self.name)

    @functools.cached_property
    def tunables(self) -> frozenset[str]:  # type: ignore[override]
        params = self._space[1].get("params")
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

    def infeasibility(self, problem: Problem, tiles: Mapping[str, Any]) -> str | None:
        try:
            why = self.refuses(problem, Config(tiles))
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
        return None  # wherever its framework runs: the device is in the stamps, and tables are kept per device

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
