"""A fuzz of concurrent writers into shared folders, with random kills (issue 94): sweeps take a journal's writer
lock (some with --no-resume's fresh start), resume what it holds, append the candidates it lacks and write their out
table; installs merge entries into an installed table; lookups read both tables and the journal all along. Some
writers are killed with SIGKILL at random moments. Afterwards every file must be valid (a kill may leave only a torn
last line, which no reader takes), every record and entry a writer saw written must be there, and no journal may
hold a candidate twice (two sweeps writing one journal measure the same candidates): counted, each harm 0."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import TableError, read_table, update_table
from kerneltune.tuning.journal import Journal, whole_record

SECONDS = 2.5  # each actor's run; the whole drill takes about this plus the checks
SWEEPS, INSTALLS, LOOKUPS = 4, 3, 2


def _ack(path: Path, text: str) -> None:
    """What a writer saw done, written unbuffered (a SIGKILL cannot lose what ``os.write`` returned for)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def _entry(name: str) -> dict:
    return {"bucket": {"name": name}, "bucket_name": name, "config": {"c": 1}, "median_us": 1.0, "spread": 0.01,
            "stamps": {}}


def _add(path: Path, name: str) -> None:
    update_table(path, "k", "cpu", lambda t: t["entries"].update({bucket_key({"name": name}): _entry(name)}))


def _sweep(root: Path, i: int, seed: int) -> None:
    from filelock import Timeout

    rng, end, n = random.Random(seed), time.monotonic() + SECONDS, 0
    journal = Journal(root / "journals/j.jsonl")
    while time.monotonic() < end:
        lock = journal.writer_lock()
        try:
            lock.acquire()
        except Timeout:
            _ack(root / f"acks/sweep{i}", "refused")
            time.sleep(rng.uniform(0.001, 0.02))
            continue
        try:
            if rng.random() < 0.3:
                lock.start_afresh()
            done = {r["key"] for r in journal.records()}  # resumed: only the candidates it lacks are measured
            todo = [f"c{k}" for k in range(10_000) if f"c{k}" not in done][:rng.randint(1, 6)]
            for key in todo:
                uid = f"s{i}-{n}"
                n += 1
                journal.append({"bucket": "b", "key": key, "uid": uid, "status": "compile",
                                "error": "x" * rng.randint(0, 3000)})
                _ack(root / f"acks/sweep{i}", f"record {uid}")
            _add(root / "out/cpu/k.json", f"s{i}-{n}")
            _ack(root / f"acks/sweep{i}", f"entry s{i}-{n}")
        finally:
            lock.release()


def _install(root: Path, i: int, seed: int) -> None:
    end, n = time.monotonic() + SECONDS, 0
    while time.monotonic() < end:
        _add(root / "installed/cpu/k.json", f"i{i}-{n}")
        _ack(root / f"acks/install{i}", f"entry i{i}-{n}")
        n += 1


def _lookup(root: Path, i: int, seed: int) -> None:
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        for table in (root / "installed/cpu/k.json", root / "out/cpu/k.json"):
            try:
                read_table(table)
                _ack(root / f"acks/lookup{i}", "read")
            except TableError as e:
                _ack(root / f"acks/lookup{i}", f"BAD {e}")
        try:
            sum(1 for _ in Journal(root / "journals/j.jsonl").records())
        except Exception as e:
            _ack(root / f"acks/lookup{i}", f"BAD {type(e).__name__}: {e}")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_concurrent_sweeps_installs_and_lookups_with_random_kills(tmp_path, record_property):
    root = tmp_path / "shared"
    (root / "acks").mkdir(parents=True)
    seed = int(os.environ.get("KERNELTUNE_FUZZ_SEED", "94"))
    rng = random.Random(seed)
    ctx = mp.get_context("fork")
    actors = [("sweep", _sweep, i) for i in range(SWEEPS)] + [("install", _install, i) for i in range(INSTALLS)]
    actors += [("lookup", _lookup, i) for i in range(LOOKUPS)]
    procs = [ctx.Process(target=fn, args=(root, i, seed * 100 + n)) for n, (_, fn, i) in enumerate(actors)]
    for p in procs:
        p.start()
    writers = [p for p, (kind, _, _) in zip(procs, actors, strict=True) if kind != "lookup"]
    kills = 0
    for victim in rng.sample(writers, 4):  # at random moments, while the others go on
        time.sleep(rng.uniform(0.05, SECONDS / 4))
        os.kill(victim.pid, signal.SIGKILL)
        kills += 1
    for p in procs:
        p.join(SECONDS + 60)
    assert all(p.exitcode is not None for p in procs)
    crashed = [p.exitcode for p in procs if p.exitcode not in (0, -signal.SIGKILL)]

    # Every journal (the live one and those set aside): whole records, but a torn last line a kill may leave.
    journals = sorted((root / "journals").glob("j*.jsonl"))
    lines = [(path, raw) for path in journals for raw in path.read_bytes().split(b"\n")[:-1]]
    tails = [path.read_bytes().rsplit(b"\n", 1)[-1] for path in journals]
    broken = sum(not whole_record(raw) for _, raw in lines)
    torn = sum(bool(t) and not whole_record(t) for t in tails)
    records = [(path, json.loads(raw)) for path, raw in lines if whole_record(raw)]
    records += [(path, json.loads(t)) for path, t in zip(journals, tails, strict=True) if t and whole_record(t)]
    uids = Counter(r["uid"] for _, r in records)
    twice = Counter((path, r["key"]) for path, r in records)
    acks = {path.name: _lines(path) for path in (root / "acks").iterdir()}
    recorded = {a.split()[1] for lines_ in acks.values() for a in lines_ if a.startswith("record ")}
    entries = {a.split()[1] for lines_ in acks.values() for a in lines_ if a.startswith("entry ")}

    # Every table valid, and what was seen written in it: a last update clears what killed writers left behind.
    tables = [root / "out/cpu/k.json", root / "installed/cpu/k.json"]
    for table in tables:
        update_table(table, "k", "cpu", lambda t: None)
    held = {e["bucket_name"] for table in tables for e in (read_table(table) or {"entries": {}})["entries"].values()}
    leftovers = [p.name for table in tables for p in table.parent.iterdir() if p.suffix == ".tmp"]
    counts = {
        "actors": len(procs), "killed": kills, "records written": len(recorded), "entries written": len(entries),
        "lookups": sum(a == "read" for lines_ in acks.values() for a in lines_),
        "sweeps refused (journal held)": sum(a == "refused" for lines_ in acks.values() for a in lines_),
        "journals set aside": len(journals) - 1, "torn last lines": torn,
        # Harm: each must be 0.
        "records lost": len(recorded - set(uids)), "records duplicated": sum(n > 1 for n in uids.values()),
        "candidates measured twice in a journal": sum(n > 1 for n in twice.values()),
        "lines not records": broken, "entries lost": len(entries - held), "temporary files left": len(leftovers),
        "bad reads": sum(a.startswith("BAD") for lines_ in acks.values() for a in lines_),
        "crashed actors": len(crashed),
    }
    record_property("fuzz summary", "concurrent writers: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    harm = {k: v for k, v in counts.items() if k in ("records lost", "records duplicated", "lines not records",
                                                      "candidates measured twice in a journal",
                                                      "entries lost", "temporary files left", "bad reads",
                                                      "crashed actors") and v}
    assert not harm, (harm, counts, [a for lines_ in acks.values() for a in lines_ if a.startswith("BAD")][:3])
    assert torn <= kills and counts["records written"] > 20 and counts["entries written"] > 20, counts
