"""``make gpu-record`` without a GPU: every step's command line is one the CLI takes, and ``summary.md`` renders
from a recorded sample (``tests/fixtures/gpu_record/``: the sweeps and verify of an H200 run), so neither rots
between the days an H200 is lent."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tarfile
import tomllib
from pathlib import Path

import click
import pytest
import typer

from kerneltune.tuning.journal import Journal
from kerneltune.tuning.phases import BucketPhases, summarize

from .paths import FIXTURES, REPO, SPACES

HERE = REPO / ".ci" / "gpu_record"
SAMPLE = FIXTURES / "gpu_record"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # summary imports record by name, as it does when run
    spec.loader.exec_module(module)
    return module


record = _load("record")
summary = _load("summary")


def _commands() -> click.Group:
    from kerneltune.cli import app

    return typer.main.get_command(app)


@pytest.mark.parametrize("part", [1, 2, 3])
def test_every_step_is_a_command_the_cli_takes_with_options_it_has(part, tmp_path):
    steps = record.plan(part)
    assert len({s.name for s in steps}) == len(steps)
    group = _commands()
    for step in steps:
        argv = record.command_line(step, "python3", tmp_path / "work", tmp_path / "raw")
        assert not any("{" in a for a in argv), argv
        assert step.timeout_s <= record.PART_SECONDS
        words = " ".join(argv).split()
        if "kerneltune" not in words or step.argv[0] == "make":
            continue
        i = words.index("kerneltune")
        command = group.commands[words[i + 1]]
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        used = {w for w in words[i + 2:] if w.startswith("--")}
        assert used <= known, f"{step.name}: {sorted(used - known)} not options of kerneltune {words[i + 1]}"


def test_the_buckets_and_examples_the_steps_name_exist():
    unseen = tomllib.loads((SPACES / "ranker_attention_unseen.toml").read_text())
    names = {b["name"] for b in unseen["buckets"]}
    assert {*record.UNSEEN, record.NEW_BUCKET} <= names
    sys.path.insert(0, str(REPO / "examples"))
    try:
        for example, bucket in record.EXAMPLES:
            assert bucket in importlib.import_module(example).KERNEL.buckets, (example, bucket)
    finally:
        sys.path.remove(str(REPO / "examples"))


def test_part_three_runs_the_makefiles_gpu_tests_and_the_bench():
    names = [s.name for s in record.plan(3)]
    assert names == ["env", "test-gpu", "bench"]
    makefile = (REPO / "Makefile").read_text()
    assert "gpu-record:" in makefile and "gpu-wheels:" in makefile and "test-gpu:" in makefile


def test_every_step_runs_with_the_records_own_tables_and_a_cold_cache_where_it_says(tmp_path):
    steps = {s.name: s for s in record.plan(1)}
    env = record.step_env(steps["sweep-cold-1"], tmp_path)
    assert env["KERNELTUNE_TABLES"] == str(tmp_path / "tables")
    assert env["KERNELTUNE_CACHE"] == str(tmp_path / "cache" / "cold-1")
    assert env["PYTHONPATH"].split(":")[0] == str(record.ROOT)
    # cold, then warm on the same builds; verify cold, then warm on the same cache
    assert steps["sweep-cold-1"].fresh_cache and not steps["sweep-warm"].fresh_cache
    assert steps["sweep-warm"].cache == steps["sweep-cold-1"].cache
    assert steps["verify-cold"].fresh_cache and steps["verify-warm"].cache == steps["verify-cold"].cache


def _sample(tmp: Path, *, winners: dict[int, str] | None = None, cut: str | None = None) -> Path:
    """A record of the sample's sweeps: its cold journal as each of the three cold sweeps, its warm one as the warm
    sweep, its verify's JUnit; each sweep's table holds an entry per bucket for ``winners`` (sweep -> config key
    of the sample's journal; default: the journal's fastest)."""
    rec = tmp / "2026-12-07"
    journal = [json.loads(x) for x in (SAMPLE / "cold.jsonl").read_text().splitlines()]
    ok = [r for r in journal if r["status"] == "ok"]
    steps: dict[int, list[dict]] = {1: [], 2: []}
    for i, part in ((1, 1), (2, 2), (3, 2)):
        folder = rec / f"part{part}" / f"sweep-cold-{i}"
        (folder / "journals").mkdir(parents=True)
        shutil.copy(SAMPLE / "cold.jsonl", folder / "journals" / "ranker_attention-live.jsonl")
        table = {}
        for bucket in sorted({r["bucket"] for r in ok}):
            mine = sorted((r for r in ok if r["bucket"] == bucket), key=lambda r: r["timing"]["median_us"])
            win = next((r for r in mine if winners and r["key"] == winners.get(i)), mine[0])
            table[bucket] = {"bucket_name": bucket, "config": win["tiles"], "median_us": win["timing"]["median_us"],
                             "spread": win["timing"]["spread"], "runner_ups": [],
                             "playoff": {"seconds": 4.5, "margin": 0.004}}
        (folder / "tables" / "nvidia-h200").mkdir(parents=True)
        (folder / "tables" / "nvidia-h200" / "ranker_attention.json").write_text(json.dumps({"entries": table}))
        steps[part].append({"name": f"sweep-cold-{i}", "argv": ["sweep"], "rc": 0, "wall_s": 90.2})
    warm = rec / "part1" / "sweep-warm" / "journals"
    warm.mkdir(parents=True)
    shutil.copy(SAMPLE / "warm.jsonl", warm / "ranker_attention-live.jsonl")
    shutil.copy(SAMPLE / "verify-cold.xml", rec / "part1" / "verify-cold.xml")
    steps[1] += [{"name": "sweep-warm", "argv": ["sweep"], "rc": 0, "wall_s": 55.2},
                 {"name": "verify-cold", "argv": ["verify"], "rc": 124 if cut == "verify-cold" else 0,
                  "wall_s": 126.7}]
    for part, items in steps.items():
        (rec / f"part{part}" / "meta.json").write_text(json.dumps({"commit": "abc1234"}))
        (rec / f"part{part}" / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in items))
    return rec


def _archived(rec: Path, dest: Path) -> Path:
    """The record as ``make gpu-record`` keeps it: a ``partN.tgz`` a part."""
    dest.mkdir(parents=True)
    for part in sorted(rec.glob("part*")):
        with tarfile.open(dest / f"{part.name}.tgz", "w:gz") as t:
            t.add(part, arcname=part.name)
    return dest


def test_the_summary_reads_each_figure_from_the_records_archives(tmp_path):
    rec = _archived(_sample(tmp_path / "made", cut="verify-cold"), tmp_path / "2026-12-07")
    text = summary.write(rec).read_text()
    assert text.startswith("# GPU record 2026-12-07\n")
    cold = summarize(BucketPhases.of_records(Journal(SAMPLE / "cold.jsonl").records()), 1)
    warm = summarize(BucketPhases.of_records(Journal(SAMPLE / "warm.jsonl").records()), 1)
    assert "at commit abc1234" in text
    assert f"| first candidate, cold (empty user cache) | {cold.first_s:.1f} s | <= 20.0 s | missed |" in text
    assert f"| first candidate, warm (its builds in the cache) | {warm.first_s:.1f} s | <= 10.0 s | missed |" in text
    assert f"{cold.busy_share:.0%} | >= 60% |" in text
    # a step cut at its limit is said so, its figure not passed off as a wall of a finished verify
    assert "exit 124" in text and "verify of the shipped table, warm (no JUnit file) | not measured" in text
    assert "a new bucket's table, cold (TPE, budget 12, warm-started) | not measured" in text
    # the sample's verify: the JUnit file's own counts
    assert "verify of the shipped table, cold (" in text and " failed" in text
    # trust: three sweeps, one winner each bucket, playoffs 4.5 s a bucket of 90.2 s
    assert text.count("| the same winner |") == 2
    assert "| sweep-cold-1 | 90 s | 9.0 s | 10.0% | met |" in text
    # parts that did not run
    assert "did not run: no pytest summary line" in text
    assert "| pallas_matmul m4096 | did not run | no entry |" in text


def test_different_winners_agree_only_within_the_recorded_margin(tmp_path):
    journal = [json.loads(x) for x in (SAMPLE / "cold.jsonl").read_text().splitlines()]
    d64 = sorted((r for r in journal if r["status"] == "ok" and r["bucket"] == "d64-none-ragged"),
                 key=lambda r: r["timing"]["median_us"])
    close, far = d64[1], d64[-1]
    near = close["timing"]["median_us"] / d64[0]["timing"]["median_us"] - 1
    slower = far["timing"]["median_us"] / d64[0]["timing"]["median_us"] - 1
    assert near < 0.004 < 0.02 < slower  # the sample's tables keep a playoff margin of 0.4%
    text = summary.render(_sample(tmp_path / "a", winners={2: close["key"]}))
    row = next(x for x in text.splitlines() if x.startswith("| d64-none-ragged"))
    assert f"winners differ, each within the others' margins (worst {near:+.1%})" in row
    text = summary.render(_sample(tmp_path / "b", winners={3: far["key"]}))
    row = next(x for x in text.splitlines() if x.startswith("| d64-none-ragged"))
    assert f"sweep 3's winner is {slower:+.1%} in sweep 1, beyond its margin 0.4%" in row


def test_unpack_puts_each_parts_archive_in_the_record_and_renders_it(tmp_path):
    rec = _sample(tmp_path / "made")
    calls = _archived(rec, tmp_path / "calls")
    dest = tmp_path / "results" / "2026-12-07"
    assert record.main(["unpack", str(calls), "--record", str(dest)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["part1.tgz", "part2.tgz", "summary.md"]
    assert (dest / "summary.md").read_text() == summary.render(rec, "2026-12-07")
    assert "| the same winner |" in (dest / "summary.md").read_text()
