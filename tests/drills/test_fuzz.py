"""Fuzz drills: damaged spaces, tables and journals (a fixed seed) through the code that reads them. Each trial
ends in a usable result or a refusal naming the file (SpaceError, TableError, a warning and a skipped line),
never in another exception; no value a check refuses (a NaN or negative time, a device kind that names a path)
gets through. The summary is printed; tracebacks and bad values accepted must be 0."""

import json
import os
import random
import traceback

import pytest

from kerneltune.files.records import is_plain_name, positive_time, record_defect
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.report.frame import load_frame
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.store import TableError, read_table, table_path
from kerneltune.tuning.journal import Journal
from kerneltune.tuning.space import SpaceError, load_space
from kerneltune.tuning.sweep import _bucket_problem
from kerneltune.tuning.table_writer import bucket_entry

from ..paths import FIXTURES, REPO, SPACES

# A fixed seed; KERNELTUNE_FUZZ_SEED tries others (a failure names the file each trial wrote).
SEED, TRIALS = int(os.environ.get("KERNELTUNE_FUZZ_SEED", "20261204")), 60
POOL = ["x", "", "-1", "0", "1e400", "nan", "NaN", "-Infinity", "[", "]", "{}", "[]", "null", "true", '"x"', "1e308",
        '"../../escaped"', '"/abs"', "[" * 200 + "]" * 200, "\xff", '"q\\"><img>"', "9" * 40]


def _damage(text: str, rng: random.Random) -> str:
    """One to three edits: a token replaced, a span cut, or a value from the pool put in."""
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text))
        kind = rng.random()
        if kind < 0.4:
            j = min(len(text), i + rng.randint(1, 12))
            text = text[:i] + rng.choice(POOL) + text[j:]
        elif kind < 0.6:
            text = text[:i] + text[i + rng.randint(1, 40):]
        else:
            text = text[:i] + rng.choice(POOL) + text[i:]
    return text


def _value_damage(obj, rng: random.Random):
    """A JSON value with one leaf replaced by a hostile value (parsed, so the file stays JSON)."""
    hostile = [float("nan"), float("inf"), -5.0, 0, "x", None, [], {}, True, "../../x", "/abs", 1e308,
               {"a": [[[[[]]]]]}, "q\"><img src=x>"]
    paths, stack = [], [((), obj)]
    while stack:
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            paths.append((*path, k))
            stack.append(((*path, k), v))
    if not paths:
        return obj
    target = rng.choice(paths)
    node = obj
    for k in target[:-1]:
        node = node[k]
    node[target[-1]] = rng.choice(hostile)
    return obj


class Tally:
    def __init__(self):
        self.counts = {"trials": 0, "refusals": 0, "tracebacks": 0, "bad values accepted": 0}
        self.failures: list[str] = []

    def trial(self, name: str, fn) -> None:
        self.counts["trials"] += 1
        try:
            bad = fn()
        except (SpaceError, TableError) as e:
            self.counts["refusals"] += 1
            assert str(e).strip(), name
            return
        except Exception:
            self.counts["tracebacks"] += 1
            self.failures.append(f"{name}: {traceback.format_exc(limit=3)}")
            return
        if bad:
            self.counts["bad values accepted"] += 1
            self.failures.append(f"{name}: accepted {bad}")


def _bad_entry_values(table) -> str | None:
    for key, e in (table or {}).get("entries", {}).items():
        times = [e.get("median_us")] if "median_us" in e else []
        times += [x.get("median_us") for x in e.get("fallbacks", []) + e.get("runner_ups", [])]
        if any(not positive_time(t) for t in times):
            return f"entry {key} with time {times}"
    return None


@pytest.mark.slow  # thousands of trials, 10 s: `make test`'s, not the quick loop's
def test_fuzz_drills(tmp_path, monkeypatch, record_property):
    rng = random.Random(SEED)
    tally = Tally()
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path / "user"))
    space_text = (SPACES / "ranker_attention.toml").read_text()
    table_text = (REPO / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json").read_text()
    journal_lines = (FIXTURES / "ranker_attention/run-c-journals/ranker_attention-live-w0.jsonl").read_text()
    journal_lines = journal_lines.splitlines()
    running = {"device_kind": "nvidia-h200", "matched": ["gpu"], "gpu": "NVIDIA H200", "kernel_hash": "x"}

    for n in range(TRIALS):
        # A space: parsed, every bucket enumerated a little.
        space = tmp_path / f"s{n}.toml"
        space.write_bytes(_damage(space_text, rng).encode("utf-8", "surrogateescape"))

        def load_one(space=space):
            s = load_space(space, set(PLUGIN.tunables), set(PLUGIN.problem_fields), "ranker_attention")
            for b in s.buckets:  # enumerated as a sweep does: over the kernel's whole problem
                fields = PLUGIN.problem_dict(_bucket_problem(PLUGIN, b))
                for i, _ in enumerate(s.configs(fields)):
                    if i > 50:
                        break
            return None

        tally.trial(f"space {space.name}", load_one)

        # A table, damaged as text and as values: read, then a launch's lookup through it.
        for how in ("text", "value"):
            root = tmp_path / f"t{n}{how}"
            path = table_path(root, "nvidia-h200", "ranker_attention")
            path.parent.mkdir(parents=True)
            text = _damage(table_text, rng) if how == "text" else json.dumps(
                _value_damage(json.loads(table_text), rng))
            path.write_text(text)

            def read_one(path=path, root=root):
                table = read_table(path)
                bucket = {"head_dim": 128, "cap_method": "tanh", "batch": 8, "seq_len": 4096, "q_heads": 8,
                          "kv_heads": 8, "dtype": "bfloat16"}
                tuned_config("ranker_attention", bucket, "x", ("head_dim", "cap_method"), running, (root,))
                return _bad_entry_values(table)

            tally.trial(f"table {path}", read_one)

        # A journal, damaged line by line as text and as values: read, reported, made into a table entry.
        lines = list(journal_lines)
        for i in rng.sample(range(len(lines)), rng.randint(1, 4)):
            lines[i] = _damage(lines[i], rng) if rng.random() < 0.5 else json.dumps(
                _value_damage(json.loads(lines[i]), rng), allow_nan=True)
        journal = tmp_path / f"j{n}/ranker_attention-live.jsonl"
        journal.parent.mkdir()
        journal.write_text("\n".join(lines) + "\n")

        def read_journal(journal=journal):
            records = list(Journal(journal).records())
            load_frame(journal)
            for bucket in {r["bucket"] for r in records}:
                bucket_entry([r for r in records if r["bucket"] == bucket], PLUGIN, 0.01)
            bad = [r for r in records if record_defect(dict(r)) is not None]
            kinds = [r.get("stamps", {}).get("device_kind") for r in records]
            bad += [k for k in kinds if k is not None and not is_plain_name(k)]
            nan = [r for r in records if isinstance(r.get("timing"), dict)
                   and not positive_time(r["timing"].get("median_us", 1.0))]
            return (bad or nan) or None

        tally.trial(f"journal {journal}", read_journal)

    record_property("drill summary", f"fuzz drills (seed {SEED}): "
                    + ", ".join(f"{k} {v}" for k, v in tally.counts.items()))
    assert tally.counts["tracebacks"] == 0 and tally.counts["bad values accepted"] == 0, "\n".join(tally.failures[:5])
    assert tally.counts["trials"] == 4 * TRIALS and tally.counts["refusals"] > 0
