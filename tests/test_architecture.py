"""The house rules, read from the code: the engine knows kernels only through the protocol and the
registry, kernels know nothing of the engine, the CLI imports no kernel, nothing probes a kernel for a
method, and the engine imports no GPU framework at module scope."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kerneltune"
FRAMEWORKS = ("jax", "jaxlib", "torch", "triton", "flydsl")


def modules(folder: str) -> list[Path]:
    root = PACKAGE / folder
    return sorted(root.rglob("*.py")) if root.is_dir() else [root]


def imports(path: Path, top_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize(("folder", "forbidden"), [("tuning", "kerneltune.kernels"), ("cli", "kerneltune.kernels"),
                                                   ("author", "kerneltune.kernels"),
                                                   ("report", "kerneltune.kernels"), ("tables", "kerneltune.kernels"),
                                                   ("kernels", "kerneltune.tuning"),
                                                   ("kernels/drafter_wide/interpreter", "kerneltune.tuning")])
def test_no_import_crosses_the_line(folder, forbidden):
    bad = [f"{p.relative_to(PACKAGE)}: {m}" for p in modules(folder) for m in imports(p) if m.startswith(forbidden)]
    assert not bad


def test_the_interpreter_knows_nothing_of_the_drafter():
    """The interpreter lives with its only user but reads any FlyDSL program: its modules import each other only."""
    bad = [f"{p.relative_to(PACKAGE)}: {m}" for p in modules("kernels/drafter_wide/interpreter")
           for m in imports(p) if m.startswith("kerneltune")]
    assert not bad


def test_the_engine_imports_no_gpu_framework_at_module_scope():
    bad = [f"{p.relative_to(PACKAGE)}: {m}" for folder in ("tuning", "cli", "seams", "files",
                                                           "kernels/drafter_wide/interpreter")
           for p in modules(folder) for m in imports(p, top_level_only=True) if m.split(".")[0] in FRAMEWORKS]
    assert not bad


# The rooms under the engine, lowest first, and what each may import of kerneltune besides itself: the typed seams
# (protocols, the worker's wire, settings, limits, the registry, the measurement rules) import only each other; the
# files and caches the tool keeps on disk, the records among them, import only the seams.
ROOMS = {"seams": (), "files": ("kerneltune.seams",)}


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_a_room_imports_only_the_rooms_below_it(room):
    allowed = (f"kerneltune.{room}", *ROOMS[room])
    bad = [f"{p.relative_to(PACKAGE)}: {m}" for p in modules(room) for m in imports(p)
           if m.startswith("kerneltune") and not m.startswith(allowed)]
    assert not bad, bad


def test_every_module_is_in_a_room_that_says_what_may_import_it():
    """No loose module at the package's top level (its face and ``python -m``'s entry aside), and each room of the
    layer under the engine has a README saying what it holds and who may import it."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose
    for room in ROOMS:
        assert "may import" in (PACKAGE / room / "README.md").read_text(), room


def test_no_capability_is_probed():
    bad = [f"{p.relative_to(PACKAGE)}:{n.lineno}" for folder in ("tuning", "cli", "report")
           for p in modules(folder) for n in ast.walk(ast.parse(p.read_text()))
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr")]
    assert not bad


def test_measuring_limits_live_in_one_place():
    """A time cap of sampling or a candidate's timeout is named in ``limits.py``, never written as a number
    elsewhere (they were 3.0, 2.0 and 1.0 s in five files)."""
    bad = []
    NAMES = ("max_seconds", "compile_timeout", "run_timeout")
    for path in PACKAGE.rglob("*.py"):
        if path.name == "limits.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            literal = isinstance(getattr(node, "value", None), ast.Constant)
            if isinstance(node, ast.keyword) and node.arg in NAMES and literal:
                bad.append(f"{path.relative_to(PACKAGE)}:{node.value.lineno} {node.arg}=")
            if isinstance(node, ast.AnnAssign) and literal and getattr(node.target, "id", "") in NAMES:
                bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.target.id} =")
            if isinstance(node, ast.FunctionDef):  # an option's or a parameter's default
                args = node.args.posonlyargs + node.args.args
                pairs = [*zip(args[len(args) - len(node.args.defaults):], node.args.defaults, strict=True),
                         *zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)]
                bad += [f"{path.relative_to(PACKAGE)}:{a.lineno} {a.arg}=" for a, d in pairs
                        if a.arg in NAMES and isinstance(d, ast.Constant) and d.value is not None]
    assert not bad, bad


def _code_text(node: ast.AST, docstrings: set[int]) -> str:
    """A name, an attribute or a string the code uses (docstrings are prose, not code)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
        return node.value
    return ""


def test_the_engine_names_no_gpu_framework():
    """Device visibility, compile caches and fatal errors are the backend's (``Backend.worker_env``,
    ``prepare_worker``, ``is_sticky``): no name or string of the engine's code says jax, torch, CUDA or HIP."""
    words = ("jax", "torch", "cuda", "hip_", "xla")
    bad = []
    for path in modules("tuning"):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree)
                      if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            text = _code_text(node, docstrings)
            if any(w in text.lower() for w in words):
                bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text[:40]!r}")
    assert not bad, bad


def test_worker_requests_are_built_in_one_place():
    """A request is a ``wire.Request`` (from ``candidate_request``), never a dict assembled where it is sent."""
    bad = []
    for path in modules("tuning"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"kernel", "config"} <= keys or "op" in keys:
                    bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not bad, bad


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere, function-local and TYPE_CHECKING imports included (an
    import inside a function hides a cycle from Python, not from a reader)."""
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, f in mods.items():
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                names = subs if len(subs) == len(node.names) else [base, *subs]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    graph[mod].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_import_cycle_even_inside_a_function():
    assert not _cycles(_module_graph())


def test_the_cycle_check_sees_a_cycle_hidden_in_a_function():
    graph = _module_graph()
    graph["kerneltune.tables.stamps"].add("kerneltune.tables.lookup")  # lookup imports stamps; now both ways
    assert ["kerneltune.tables.lookup", "kerneltune.tables.stamps"] in _cycles(graph)


def _status_literals(tree: ast.AST) -> list[int]:
    """Lines where a status word is written as a string: compared with, put under a "status" key, or passed as
    ``status=``. A status is a ``wire.Status``; its words are spelled once, in its enum."""
    from kerneltune.seams.wire import Status

    words = {str(s) for s in Status}

    def word(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value in words

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            parts += [e for p in parts if isinstance(p, ast.Tuple | ast.List | ast.Set) for e in p.elts]
            lines += [node.lineno for p in parts if word(p)]
        elif isinstance(node, ast.Dict):
            lines += [node.lineno for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "status" and word(v)]
        elif isinstance(node, ast.keyword) and node.arg == "status" and word(node.value):
            lines.append(node.lineno)
    return lines


def test_no_status_is_written_as_a_string_outside_its_enum():
    bad = [f"{p.relative_to(PACKAGE)}:{line}" for p in PACKAGE.rglob("*.py") if p.name != "wire.py"
           for line in _status_literals(ast.parse(p.read_text()))]
    assert not bad, bad


def test_the_status_check_sees_a_status_written_as_a_string():
    planted = 'ok = reply.status == "ok"\nr = {"status": "timeout"}\nf(status="pruned")\nif s in ("compile", x): pass'
    assert sorted(_status_literals(ast.parse(planted))) == [1, 2, 3, 4]
    assert not _status_literals(ast.parse('ok = reply.status == Status.OK\nword = "ok"'))


# Modules whose string keys are no record's or entry's: the worker's messages (typed in ``wire`` itself), space files,
# the miss ledger's lines (typed in ``ledger``), and the report's pandas frame, whose columns are ``frame.SCHEMA``.
NOT_RECORDS = ("files/records.py", "seams/wire.py", "tuning/space.py", "tables/ledger.py", "report/html.py",
               "report/charts.py", "report/ranking.py")
# The string-keyed reads of a record's or an entry's field name left outside the records module (from 398 in 26 files
# when a journal line and a table entry were dicts): a table's own "kernel", a bench or coverage row, a phases
# median, a space bucket's "problem", ``make_record``'s reply. One more fails this test: read the attribute.
RECORD_READS = 14


def _record_field_reads(tree: ast.AST) -> list[int]:
    """Lines that read a ``Record``'s, ``Entry``'s or ``Measured``'s field by its JSON name as a string:
    ``x["median_us"]`` or ``x.get("median_us")``."""
    from kerneltune.files.records import Entry, Measured, Record

    names = {name for cls in (Record, Entry, Measured) for name in cls._declared()}
    lines = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if isinstance(key, str) and key in names:
            lines.append(node.lineno)
    return lines


def test_records_and_entries_are_read_by_their_attributes():
    """A misspelt attribute fails at once (and in a type checker); a misspelt string key reads None."""
    reads = [f"{p.relative_to(PACKAGE)}:{line}" for p in sorted(PACKAGE.rglob("*.py"))
             if "kernels" not in p.relative_to(PACKAGE).parts and str(p.relative_to(PACKAGE)) not in NOT_RECORDS
             for line in _record_field_reads(ast.parse(p.read_text()))]
    assert len(reads) <= RECORD_READS, reads


def test_the_record_read_count_sees_a_string_keyed_read():
    planted = 'm = rec["timing"]["median_us"]\nc = entry.get("config")\nk = rec["tiles"]\nok = entry.config'
    assert sorted(_record_field_reads(ast.parse(planted))) == [1, 1, 2, 3]
