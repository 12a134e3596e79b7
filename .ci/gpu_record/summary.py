"""``summary.md`` of a GPU record: every figure beside its target, read from the record's archives alone
(``partN.tgz``, unpacked into a temporary folder).

A part that did not run, or a step that failed or was cut, shows as such: its figures read "not measured", never
a figure from elsewhere. The previous bench record is the baseline the bench's figures are compared with (drift).
"""

from __future__ import annotations

import json
import re
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PREVIOUS_BENCH = ROOT / "results" / "bench" / "2026-12-04-nvidia-h200-run-an.json"
MISSING = "not measured"
# Issue 82's targets, kept by issue 97.
TARGETS = {"first_cold_s": 20.0, "first_warm_s": 10.0, "busy_cold": 0.60, "new_bucket_s": 60.0,
           "verify_cold_s": 60.0, "verify_warm_s": 30.0, "playoff_share": 0.10}


def steps(record: Path, part: int) -> dict[str, dict[str, Any]]:
    path = record / f"part{part}" / "steps.jsonl"
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[item["name"]] = item
    return out


def records(folder: Path) -> Iterator[dict[str, Any]]:
    """Every whole journal line under ``folder`` (a cut last line is left out)."""
    for path in sorted(folder.glob("journals/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def entries(folder: Path) -> dict[str, dict[str, Any]]:
    """The tuned table's entries a sweep wrote, by bucket name."""
    out = {}
    for path in sorted(folder.glob("tables/*/*.json")):
        for e in json.loads(path.read_text(encoding="utf-8")).get("entries", {}).values():
            out[e["bucket_name"]] = e
    return out


def phases(folder: Path) -> dict[str, float] | None:
    """The sweep's own phase summary (``kerneltune.tuning.phases``) of its journal."""
    from kerneltune.files.records import Record, record_defect
    from kerneltune.tuning.phases import BucketPhases, summarize

    read = [Record.build(r) for r in records(folder) if record_defect(r) is None]
    s = summarize(BucketPhases.of_records(read), compile_workers=1)
    return None if s is None else {"first_s": s.first_s, "busy": s.busy_share, "per_minute": s.per_minute,
                                   "candidates": s.candidates}


def junit(path: Path) -> str:
    if not path.is_file():
        return "no JUnit file"
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    n = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return f"{n} items, {bad} failed, {skipped} skipped"


def _label(config: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(config.items()))


def _verdict(value: float | None, target: float, at_most: bool) -> str:
    if value is None:
        return MISSING
    return "met" if (value <= target if at_most else value >= target) else "missed"


def _ran(step: Mapping[str, Any] | None) -> str:
    if step is None:
        return "did not run"
    if "skipped" in step:
        return f"skipped ({step['skipped']})"
    return f"rc {step['rc']}, {step['wall_s']:.1f} s" + (" (cut at its limit)" if step["rc"] in (124, 137) else "")


def time_to_table(record: Path) -> list[tuple[str, str, str, str]]:
    """(figure, value, target, verdict) rows of issue 82's targets."""
    st = steps(record, 1)
    p1 = record / "part1"
    cold = phases(p1 / "sweep-cold-1") if "sweep-cold-1" in st else None
    warm = phases(p1 / "sweep-warm") if "sweep-warm" in st else None
    rows = []

    def row(name: str, value: float | None, fmt: str, key: str, at_most: bool) -> None:
        shown = MISSING if value is None else fmt.format(value)
        sign = "<=" if at_most else ">="
        target = TARGETS[key]
        rows.append((name, shown, f"{sign} {fmt.format(target)}", _verdict(value, target, at_most)))

    row("first candidate, cold (empty user cache)", cold and cold["first_s"], "{:.1f} s", "first_cold_s", True)
    row("first candidate, warm (its builds in the cache)", warm and warm["first_s"], "{:.1f} s", "first_warm_s",
        True)
    row("timing worker busy, cold sweep of the two unseen buckets", cold and cold["busy"], "{:.0%}", "busy_cold",
        False)
    new = st.get("new-bucket-cold")
    new_ok = new is not None and new.get("rc") == 0 and entries(p1 / "new-bucket-cold")
    row("a new bucket's table, cold (TPE, budget 12, warm-started)", new["wall_s"] if new_ok else None, "{:.0f} s",
        "new_bucket_s", True)
    for which in ("cold", "warm"):
        s = st.get(f"verify-{which}")
        ok = s is not None and s.get("rc") in (0,)
        row(f"verify of the shipped table, {which} ({junit(p1 / f'verify-{which}.xml')})",
            s["wall_s"] if s and "wall_s" in s else None, "{:.0f} s", f"verify_{which}_s", True)
        if s is not None and not ok:
            rows[-1] = (*rows[-1][:3], f"{rows[-1][3]}; exit {s.get('rc')}")
    if cold:
        rows.append(("candidates a minute, cold (steady state)", f"{cold['per_minute']:.0f}", "", ""))
    return rows


def trust(record: Path) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Per bucket, the three cold sweeps' winners and whether they agree within their margins; per sweep, the
    playoff's share of its wall."""
    sweeps = {}
    for i, part in ((1, 1), (2, 2), (3, 2)):
        s = steps(record, part).get(f"sweep-cold-{i}")
        folder = record / f"part{part}" / f"sweep-cold-{i}"
        if s is not None and "wall_s" in s and folder.is_dir():
            sweeps[i] = (s, folder, entries(folder))
    shares = []
    for i, (s, _, ents) in sorted(sweeps.items()):
        play = sum(float((e.get("playoff") or {}).get("seconds", 0.0)) for e in ents.values())
        share = play / s["wall_s"] if s["wall_s"] else None
        shares.append((f"sweep-cold-{i}", f"{s['wall_s']:.0f} s", f"{play:.1f} s",
                       MISSING if share is None else f"{share:.1%}",
                       _verdict(share, TARGETS["playoff_share"], True)))
    rows = []
    buckets = sorted({b for _, _, ents in sweeps.values() for b in ents})
    for b in buckets:
        won = {i: ents[b] for i, (_, _, ents) in sweeps.items() if b in ents}
        labels = {i: _label(e["config"]) for i, e in won.items()}
        if len(won) < 3:
            verdict = f"{len(won)} of 3 sweeps wrote an entry"
        elif len(set(labels.values())) == 1:
            verdict = "the same winner"
        else:
            verdict = _within_margins(won, sweeps)
        cells = "; ".join(f"{i}: {labels[i]} {won[i]['median_us']:.1f} µs" for i in sorted(won))
        rows.append((b, cells, verdict))
    return rows, shares


def _within_margins(won: Mapping[int, Mapping[str, Any]], sweeps: Mapping[int, Any]) -> str:
    """Different winners agree when each is, in every other sweep, a runner-up of that sweep's winner or within
    its recorded margin (the playoff's, else the winner's spread)."""
    worst = 0.0
    for i, e in won.items():
        runner_ups = {_label(r["config"]) for r in e.get("runner_ups", [])}
        margin = (e.get("playoff") or {}).get("margin")
        allowed = max(float(margin) if margin is not None else 0.0, float(e.get("spread", 0.0)))
        times = {_label(r["tiles"]): r["timing"]["median_us"] for r in records(sweeps[i][1])
                 if r.get("status") == "ok" and r.get("bucket") == e["bucket_name"] and "tiles" in r}
        for j, other in won.items():
            lab = _label(other["config"])
            if j == i or lab == _label(e["config"]) or lab in runner_ups:
                continue
            if lab not in times:
                return f"sweep {j}'s winner was not measured in sweep {i}"
            ratio = times[lab] / e["median_us"] - 1.0
            worst = max(worst, ratio)
            if ratio > allowed:
                return f"sweep {j}'s winner is {ratio:+.1%} in sweep {i}, beyond its margin {allowed:.1%}"
    return f"winners differ, each within the others' margins (worst {worst:+.1%})"


def examples(record: Path) -> list[tuple[str, ...]]:
    from record import EXAMPLES  # the same list the steps ran

    st = steps(record, 2)
    rows = []
    for ex, bucket in EXAMPLES:
        sweep = st.get(f"{ex}-sweep")
        ents = entries(record / "part2" / f"{ex}-sweep")
        winner = ents.get(bucket)
        probe = _probe(record / "part2" / f"{ex}-probe.txt")
        lookup = MISSING
        if probe and winner:
            lookup = "the table's winner" if probe["tuned"] == winner["config"] else f"{_label(probe['tuned'])}"
        t = (probe or {}).get("rows", {})

        def us(label: str, t: Mapping[str, Any] = t) -> str:
            r = t.get(label)
            return MISSING if r is None else f"{r['median_us']:.1f} ({r['check']})"
        ratio = MISSING if not probe else (f"{probe['tuned_over_framework']:.2f}x framework, "
                                           f"{probe['tuned_over_heuristic']:.2f}x heuristic")
        verify = st.get(f"{ex}-verify")
        rows.append((f"{ex} {bucket}", _ran(sweep), _label(winner["config"]) if winner else "no entry",
                     _ran(st.get(f"{ex}-install")), lookup,
                     f"{_ran(verify)}; {junit(record / 'part2' / f'{ex}-verify.xml')}",
                     us("tuned"), us("heuristic"), us("framework"), ratio))
    return rows


def _probe(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    start = text.find("{\n")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None


def gpu_tests(record: Path) -> tuple[str, str]:
    s = steps(record, 3).get("test-gpu")
    path = record / "part3" / "test-gpu.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    counts = [ln.strip("= ") for ln in lines if re.search(r"\d+ (passed|failed|error)", ln)]
    return _ran(s), " / ".join(counts) or "no pytest summary line"


def bench(record: Path) -> list[tuple[str, ...]]:
    """The bench's targets, each beside the previous record's value of the same target and shape."""
    found = sorted((record / "part3" / "bench").glob("*.json"))
    if not found:
        return []
    new = json.loads(found[-1].read_text(encoding="utf-8"))
    old = json.loads(PREVIOUS_BENCH.read_text(encoding="utf-8")) if PREVIOUS_BENCH.is_file() else {"targets": []}
    before = {(t["target"], t["shape"], t.get("cap_method")): t for t in old.get("targets", [])}
    rows = []
    for t in new.get("targets", []):
        prev = before.get((t["target"], t["shape"], t.get("cap_method")))
        value, was = t.get("value"), prev and prev.get("value")
        drift = f"{value / was:.3f}" if isinstance(value, float) and isinstance(was, float) and was else ""
        bound = t.get("at_least", t.get("at_most", ""))
        rows.append((t["target"], t["shape"], _num(value), str(bound), t.get("verdict", ""), _num(was), drift))
    return rows


def _num(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else MISSING if v is None else str(v)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    return out


def render(record: Path, title: str | None = None) -> str:
    metas = [json.loads((record / f"part{p}" / "meta.json").read_text(encoding="utf-8"))
             for p in (1, 2, 3) if (record / f"part{p}" / "meta.json").is_file()]
    commits = sorted({m["commit"] for m in metas}) or ["unknown"]
    lines = [f"# GPU record {title or record.name}", "",
             f"`make gpu-record` (`.ci/gpu_record/record.py`) at commit {', '.join(commits)}; parts run: "
             f"{', '.join(str(p) for p in (1, 2, 3) if (record / f'part{p}' / 'steps.jsonl').is_file()) or 'none'}. "
             "Each part's console, journals, tables and JUnit files are in `partN.tgz`; every figure below is read "
             "from them by `.ci/gpu_record/summary.py`.", ""]
    for p in (1, 2, 3):
        env = record / f"part{p}" / "env.txt"
        if env.is_file():
            lines += [f"Part {p}'s machine:", "", "```text", *env.read_text(encoding="utf-8").strip().splitlines(),
                      "```", ""]
    lines += ["## Time to a tuned table (part 1)", "",
              *_table(("figure", "measured", "target", "verdict"), time_to_table(record)), ""]
    rows, shares = trust(record)
    lines += ["## Trust: three cold sweeps of the two unseen buckets (parts 1-2)", "",
              *_table(("bucket", "winners (sweep: config, median)", "verdict"), rows), "",
              *_table(("sweep", "wall", "playoffs", "playoff share", f"<= {TARGETS['playoff_share']:.0%}"), shares),
              ""]
    lines += ["## The examples on the GPU (part 2)", "",
              "Median µs of the tuned config, the heuristic's and the framework's own op on the same inputs (each "
              "checked against the float64 reference, outputs poisoned first).", "",
              *_table(("example", "sweep", "winner", "install", "lookup", "verify", "tuned µs", "heuristic µs",
                       "framework µs", "tuned over"), examples(record)), ""]
    ran, counts = gpu_tests(record)
    lines += ["## `make test-gpu` (part 3)", "", f"{ran}: {counts}", ""]
    b = bench(record)
    lines += ["## The ranker's bench (part 3) against the previous record", "",
              f"Drift: this record's value over `{PREVIOUS_BENCH.relative_to(ROOT)}`'s.", ""]
    lines += _table(("target", "shape", "value", "bound", "verdict", "previous", "drift"), b) if b else [MISSING]
    lines += ["", "## Steps", ""]
    for p in (1, 2, 3):
        st = steps(record, p)
        if st:
            lines += [f"Part {p}:", "", *_table(("step", "ran", "command"),
                                                 [(n, _ran(s), "`" + " ".join(s.get("argv", [])) + "`")
                                                  for n, s in st.items()]), ""]
    return "\n".join(lines).rstrip() + "\n"


def write(record: Path) -> Path:
    """Render ``record/summary.md`` from the ``partN.tgz`` archives in ``record``."""
    with tempfile.TemporaryDirectory() as tmp:
        for tgz in sorted(record.glob("part*.tgz")):
            with tarfile.open(tgz) as t:
                t.extractall(tmp, filter="data")
        text = render(Path(tmp), record.name)
    path = record / "summary.md"
    path.write_text(text, encoding="utf-8")
    return path
