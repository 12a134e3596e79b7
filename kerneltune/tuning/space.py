"""Search spaces from ``search_spaces/*.toml``: parameters, constraints and buckets.

Every error names the file, the line where it can be found and the field.
Constraints are Python-like expressions, parsed once and evaluated over a
whitelist of AST nodes (no calls, no attributes), so a space file cannot run code.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import math
import operator
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltune.files.safe_io import brief
from kerneltune.seams.registry import canonical_name

_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.BinOp, ast.Add,
    ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
    ast.IfExp,
)


# Values one parameter may take: a range is counted before it is built, so a typo'd bound is a refusal, not
# a MemoryError.
MAX_VALUES = 10_000
# Configs a bucket's space may hold for a load to prove its constraints satisfiable (a walk of the product), and
# for an exhaustive sweep to enumerate: beyond, a sampler searches it (--strategy tpe --budget N).
PROVED_CONFIGS = 1_000_000


class SpaceError(ValueError):
    """A search-space file that cannot be used; the message names file, line and field."""


# What a parameter's value or a problem's field may be: TOML's date-times and tables are no value a kernel takes
# (a date-time reached a traceback, or was refused only when journaled, naming the journal).
_SCALARS = (str, int, float, bool)


def _point_key(config: Mapping[str, Any]) -> str:
    return json.dumps({k: config[k] for k in sorted(config)})


def _listed_configs(path: Path, text: str, raw: Any, tunables: set[str]) -> tuple[dict[str, list[Any]],
                                                                                  tuple[dict[str, Any], ...]]:
    """``configs = [...]``: each an object of the same tunables, each value a string, number or bool; the params
    they span (each field's values in the list's order)."""
    where = _where(path, text, "configs")
    if not isinstance(raw, list) or not raw:
        raise SpaceError(f"{where}: configs: expected a non-empty list of configs ({{ name = value, ... }})")
    if len(raw) > MAX_VALUES:
        raise SpaceError(f"{where}: configs: {len(raw)} configs; a list holds at most {MAX_VALUES}")
    fields: list[str] | None = None
    for i, config in enumerate(raw):
        if not isinstance(config, Mapping) or not config:
            raise SpaceError(f"{where}: configs[{i}]: {config!r:.80} is not a table of tunables and values")
        if fields is None:
            fields = list(config)
        if set(config) != set(fields):
            raise SpaceError(f"{where}: configs[{i}]: fields {sorted(config)}, configs[0] has {sorted(fields)}; "
                             f"every config sets the same tunables")
        for k, v in config.items():
            if k not in tunables:
                raise SpaceError(f"{where}: configs[{i}].{k}: unknown parameter (the kernel tunes {sorted(tunables)})")
            if type(v) not in _SCALARS:
                raise SpaceError(f"{where}: configs[{i}].{k}: {type(v).__name__} {v!r:.60} is not a string, number "
                                 f"or bool (a table stores configs as JSON)")
    assert fields is not None
    if len({_point_key(c) for c in raw}) != len(raw):
        raise SpaceError(f"{where}: configs: a config is listed twice")
    params = {k: list(dict.fromkeys(c[k] for c in raw)) for k in fields}
    return params, tuple(dict(c) for c in raw)


def _numbers_only(op: Callable[[Any, Any], Any], refusal: str) -> Callable[[Any, Any], Any]:
    """``op`` of numbers only: ``*`` repeats a sequence (``[0] * 10**8`` would fill memory) and ``%`` formats a
    string (``'%0800000000d' % x`` asks for 800 MB)."""
    def numbers_only(a: Any, b: Any) -> Any:
        if not all(isinstance(x, int | float) for x in (a, b)):
            raise TypeError(f"{refusal}, not {type(a).__name__} and {type(b).__name__}")
        return op(a, b)
    return numbers_only


_times = _numbers_only(operator.mul, "'*' multiplies numbers only")
_mod = _numbers_only(operator.mod, "'%' takes numbers only")


_NUMBERS_ONLY = {ast.Mult: "_times", ast.Mod: "_mod"}


class _NumbersOnly(ast.NodeTransformer):
    """Each ``*`` and ``%`` a call that refuses anything but numbers: what they do to a string or a list
    allocates without bound."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if (name := _NUMBERS_ONLY.get(type(node.op))) is not None:
            return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), [node.left, node.right], []), node)
        return node


@dataclass(frozen=True)
class Constraint:
    expr: str
    why: str
    code: Any = field(compare=False, repr=False)
    where: str = ""  # file:line of the expression, for errors

    def holds(self, env: Mapping[str, Any]) -> bool:
        try:
            return bool(eval(self.code, {"__builtins__": {}, "_times": _times, "_mod": _mod}, dict(env)))
        except NameError:
            raise
        except Exception as e:  # a division by zero, a type mismatch: the file's fault, named
            values = ", ".join(f"{k}={v!r}" for k, v in env.items() if k in self.code.co_names
                               and k not in ("_times", "_mod"))
            raise SpaceError(f"{self.where}: constraint {self.expr!r} raised {type(e).__name__} ({e}) "
                             f"at {values}") from None


@dataclass(frozen=True)
class Bucket:
    name: str
    problem: dict[str, Any]
    bounds: dict[str, Any]
    where: str = ""  # file:line of the bucket, for errors


@dataclass(frozen=True)
class Space:
    path: Path
    kernel: str
    params: dict[str, list[Any]]
    constraints: tuple[Constraint, ...]
    buckets: tuple[Bucket, ...]
    # An explicit list of configs (``configs = [...]``, a Triton autotuner's list) instead of every combination of
    # ``params`` (then each field's values in the list's order): only these, in this order.
    listed: tuple[dict[str, Any], ...] | None = None

    def configs(self, problem_fields: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every combination of the params (or every listed config) that satisfies the constraints for this
        problem."""
        names = list(self.params)
        points = (dict(c) for c in self.listed) if self.listed is not None else (
            dict(zip(names, values, strict=True)) for values in itertools.product(*(self.params[n] for n in names)))
        for config in points:
            if self.allows(config, problem_fields):
                yield config

    def allows(self, config: Mapping[str, Any], problem_fields: Mapping[str, Any]) -> bool:
        """Whether one config satisfies every constraint for this problem."""
        return self.excluded_by(config, problem_fields) is None

    def excluded_by(self, config: Mapping[str, Any], problem_fields: Mapping[str, Any]) -> str | None:
        """The first constraint this config breaks for this problem, in words (its ``why``, else its expression),
        or None."""
        if self.listed is not None and _point_key(config) not in self._listed_keys:
            return "not one of the space's listed configs"
        env = {**problem_fields, **config}
        for c in self.constraints:
            if not c.holds(env):
                return f"{c.why} ({c.expr})" if c.why else f"breaks the constraint {c.expr}"
        return None

    @property
    def size(self) -> int:
        """The configs the space holds before its constraints: the listed ones, or every combination."""
        return len(self.listed) if self.listed is not None else math.prod(len(v) for v in self.params.values())

    @functools.cached_property
    def _listed_keys(self) -> frozenset[str]:
        return frozenset(_point_key(c) for c in self.listed or ())

    def bucket(self, name: str) -> Bucket:
        for b in self.buckets:
            if b.name == name:
                return b
        raise SpaceError(f"{self.path}: no bucket named {name!r} (have {[b.name for b in self.buckets]})")


@functools.lru_cache(maxsize=32)
def _lines_of(text: str, key: str) -> tuple[int, ...]:
    """1-based lines of every ``key =`` (or ``[[key]]``) in the file text, found once a file and key: a lookup
    per bucket made loading quadratic in the buckets (10,000 buckets: 50 s)."""
    # ``[ \t]*``, not ``\s*``: a match must not start on the blank line before its key (it named that line).
    pattern = re.compile(rf"^[ \t]*(\[\[?[ \t]*{re.escape(key)}[ \t]*\]\]?|{re.escape(key)}[ \t]*=)", re.M)
    lines, line, at = [], 1, 0
    for m in pattern.finditer(text):
        line += text.count("\n", at, m.start())
        at = m.start()
        lines.append(line)
    return tuple(lines)


def _line_of(text: str, key: str, occurrence: int = 0) -> int | None:
    """1-based line of the ``occurrence``-th ``key =`` (or ``[[key]]``) in the file text."""
    lines = _lines_of(text, key)
    return lines[occurrence] if occurrence < len(lines) else None


def _scalar_defect(value: Any) -> str | None:
    if isinstance(value, _SCALARS):
        return None
    kind = "an inline table" if isinstance(value, dict) else "a list" if isinstance(value, list) else \
        f"a TOML {type(value).__name__}" if type(value).__module__ == "datetime" else type(value).__name__
    return f"{brief(value)} is {kind}, not a string, number or bool"


def _where(path: Path, text: str, key: str, occurrence: int = 0) -> str:
    line = _line_of(text, key, occurrence)
    return f"{path}:{line}" if line else str(path)


def _param_values(path: Path, text: str, name: str, spec: Any) -> list[Any]:
    where = _where(path, text, name)
    if isinstance(spec, list):
        if not spec:
            raise SpaceError(f"{where}: params.{name}: the list of values is empty")
        for i, value in enumerate(spec):
            if (why := _scalar_defect(value)) is not None:
                raise SpaceError(f"{where}: params.{name}[{i}]: {why} (a table stores configs as JSON); a list of "
                                 f"whole configs, such as a Triton autotuner's, is configs = [...] (on a "
                                 f"kerneltune.Kernel: configs = fn.configs)")
        if len(spec) > MAX_VALUES:
            raise SpaceError(f"{where}: params.{name}: {len(spec)} values; a parameter takes at most {MAX_VALUES}")
        if len(set(map(repr, spec))) != len(spec):
            raise SpaceError(f"{where}: params.{name}: values repeat: {spec}")
        return spec
    if isinstance(spec, dict) and set(spec) == {"range"}:
        r = spec["range"]
        if not (isinstance(r, list) and len(r) in (2, 3) and all(isinstance(x, int) for x in r)):
            raise SpaceError(f"{where}: params.{name}: range must be [lo, hi] or [lo, hi, step] integers")
        lo, hi, step = (*r, 1) if len(r) == 2 else r
        if step <= 0 or lo > hi:
            raise SpaceError(f"{where}: params.{name}: impossible range {r} (need lo <= hi, step > 0)")
        count = (hi - lo) // step + 1  # counted, not ``len``: a range past ssize_t has no len
        if count > MAX_VALUES:
            raise SpaceError(f"{where}: params.{name}: range {r} holds {count} values; a parameter takes at "
                             f"most {MAX_VALUES}")
        return list(range(lo, hi + 1, step))
    raise SpaceError(f"{where}: params.{name}: expected a list of values or {{ range = [lo, hi] }}")


def _constraint(path: Path, text: str, index: int, raw: Any, names: set[str]) -> Constraint:
    where = _where(path, text, "expr", index)
    unknown_keys = set(raw) - {"expr", "why"} if isinstance(raw, dict) else set()
    if unknown_keys:
        key = sorted(unknown_keys)[0]
        raise SpaceError(f"{_where(path, text, key)}: constraints[{index}]: unknown field(s) {sorted(unknown_keys)} "
                         f"(a constraint has expr and why)")
    if not isinstance(raw, dict) or not isinstance(raw.get("expr"), str):
        raise SpaceError(f"{where}: constraints[{index}].expr: a string expression is required")
    expr = raw["expr"]
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise SpaceError(f"{where}: constraints[{index}].expr: not an expression ({e.msg}): {expr!r}") from None
    except (MemoryError, RecursionError):  # Python's parser refuses deep nesting this way
        raise SpaceError(f"{where}: constraints[{index}].expr: nested too deeply to parse") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise SpaceError(f"{where}: constraints[{index}].expr: {type(node).__name__} is not allowed in {expr!r}")
        if isinstance(node, ast.Name) and node.id not in names:
            raise SpaceError(f"{where}: constraints[{index}].expr: unknown name {node.id!r} in {expr!r}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Mod) and any(
                isinstance(x, ast.List | ast.Tuple) or (isinstance(x, ast.Constant) and isinstance(x.value, str))
                for x in (node.left, node.right)):
            op = "*" if isinstance(node.op, ast.Mult) else "%"
            raise SpaceError(f"{where}: constraints[{index}].expr: '{op}' of a string or a sequence in {expr!r}; "
                             f"it takes numbers only")
    try:
        tree = ast.fix_missing_locations(_NumbersOnly().visit(tree))
        code = compile(tree, str(path), "eval")
    except (MemoryError, RecursionError):
        raise SpaceError(f"{where}: constraints[{index}].expr: nested too deeply to compile") from None
    return Constraint(expr, str(raw.get("why", "")), code, where)


def load_space(path: Path | str, tunables: set[str], problem_fields: set[str], for_kernel: str | None = None) -> Space:
    """Parse and check a space file against the kernel's name, tunables and problem fields."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpaceError(f"{path}: not a TOML text file (byte {e.start} is not UTF-8)") from None
    except OSError as e:
        raise SpaceError(f"{path}: cannot read ({e.strerror or type(e).__name__})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpaceError(f"{path}: malformed TOML: {e}") from None
    except RecursionError:
        raise SpaceError(f"{path}: nested too deeply to be a space") from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise SpaceError(f"{path}: not a space: {e}") from None
    return space_from_data(data, path, tunables, problem_fields, for_kernel, text)


def space_from_data(data: Mapping[str, Any], path: Path, tunables: set[str], problem_fields: set[str],
                    for_kernel: str | None = None, text: str = "") -> Space:
    """A space from its tables (a parsed file, or a kernel's own space written in Python), checked as a file
    is; ``path`` names it in errors (with line numbers where ``text`` holds the file)."""
    unknown_top = set(data) - {"kernel", "params", "configs", "constraints", "buckets"}
    if unknown_top:
        key = sorted(unknown_top)[0]
        raise SpaceError(f"{_where(path, text, key)}: unknown top-level field {key!r}")
    kernel = data.get("kernel", for_kernel)  # optional: the kernel swept names it
    if not isinstance(kernel, str):
        raise SpaceError(f"{_where(path, text, 'kernel')}: kernel: a kernel name string is required")
    if for_kernel is not None and canonical_name(kernel) != for_kernel:
        raise SpaceError(f"{_where(path, text, 'kernel')}: kernel = {kernel!r}, but the kernel swept is "
                         f"{for_kernel!r}")
    raw_params = data.get("params")
    listed = None
    if "configs" in data:
        if raw_params is not None:
            raise SpaceError(f"{_where(path, text, 'configs')}: configs: give params (every combination) or configs "
                             f"(a list), not both")
        params, listed = _listed_configs(path, text, data["configs"], tunables)
    elif not isinstance(raw_params, dict) or not raw_params:
        raise SpaceError(f"{path}: params: a [params] table with at least one parameter is required")
    else:
        params = {}
        for name, spec in raw_params.items():
            if name not in tunables:
                raise SpaceError(f"{_where(path, text, name)}: params.{name}: unknown parameter "
                                 f"(kernel {kernel!r} tunes {sorted(tunables)})")
            params[name] = _param_values(path, text, name, spec)

    names = set(params) | problem_fields
    raw_constraints = data.get("constraints", [])
    if not isinstance(raw_constraints, list):
        raise SpaceError(f"{path}: constraints: expected [[constraints]] tables")
    constraints = tuple(_constraint(path, text, i, c, names) for i, c in enumerate(raw_constraints))

    buckets = []
    if not isinstance(data.get("buckets", []), list):
        raise SpaceError(f"{_where(path, text, 'buckets')}: buckets: expected [[buckets]] tables")
    for i, raw in enumerate(data.get("buckets", [])):
        where = _where(path, text, "buckets", i)
        named = isinstance(raw, dict) and isinstance(raw.get("name"), str)
        if not named or not isinstance(raw.get("problem"), dict):
            raise SpaceError(f"{where}: buckets[{i}]: needs a name and a problem table")
        extra = set(raw["problem"]) - problem_fields
        if extra:
            raise SpaceError(f"{where}: buckets[{i}].problem: unknown field(s) {sorted(extra)}")
        for field_name, value in raw["problem"].items():
            if (why := _scalar_defect(value)) is not None:
                raise SpaceError(f"{where}: buckets[{i}].problem.{field_name}: {why}")
        if not isinstance(raw.get("bounds", {}), dict):
            raise SpaceError(f"{where}: buckets[{i}].bounds: {raw['bounds']!r} is not a table (bounds = {{ ... }})")
        buckets.append(Bucket(raw["name"], dict(raw["problem"]), dict(raw.get("bounds", {})), where))
    seen: dict[str, int] = {}
    for i, b in enumerate(buckets):
        if (first := seen.setdefault(b.name, i)) != i:  # named at the second one, with the first's index
            raise SpaceError(f"{b.where}: buckets[{i}].name: {b.name!r} is the name of buckets[{first}] too; two "
                             f"buckets share a name")

    space = Space(path, kernel, params, constraints, tuple(buckets), listed)
    _check_constraints_satisfiable(space, text)
    return space


def _check_constraints_satisfiable(space: Space, text: str) -> None:
    """A constraint false for every config of every bucket is a contradiction, not a filter. Proved on spaces of
    at most ``PROVED_CONFIGS`` configs a bucket; a larger one (searched by a sampler, never enumerated whole) is
    judged where its configs are drawn."""
    if space.size > PROVED_CONFIGS:
        return
    problems = [b.problem for b in space.buckets] or [{}]
    points = space.listed if space.listed is not None else [
        dict(zip(space.params, values, strict=True)) for values in itertools.product(*space.params.values())]
    for i, c in enumerate(space.constraints):
        ok = False
        for problem in problems:
            for point in points:
                env = {**problem, **point}
                try:
                    if c.holds(env):
                        ok = True
                        break
                except NameError:
                    ok = True  # needs a problem field no bucket gives; judged per problem later
                    break
            if ok:
                break
        if not ok:
            raise SpaceError(f"{_where(space.path, text, 'expr', i)}: constraints[{i}].expr: "
                             f"excludes every config ({c.expr!r})")
    for b in space.buckets:
        try:
            found = any(True for _ in space.configs(b.problem))
        except NameError as e:
            raise SpaceError(f"{b.where}: bucket {b.name!r} gives no {e.name!r}, which a constraint reads") from None
        if not found:
            raise SpaceError(f"{space.path}: the constraints leave no config for problem {b.problem}")
