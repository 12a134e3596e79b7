"""``make gpu-record``: every GPU figure the guide quotes, measured again on one H200 by one command.

``PART=1|2|3`` runs one part (each fits a ten-minute call on a 16-core H200 host); no ``PART`` runs the three in a row.
Each step's console goes to ``partN/NAME.txt`` and its command line, exit code and wall to ``partN/steps.jsonl``; the
journals and tables a step wrote are copied beside them. A part ends as ``partN.tgz`` in the record
(``results/gpu-record/<date>/``), and ``summary.md`` is rendered from those archives alone (``summary.py``): the CPU
tests render it from a recorded sample and build every step's command line without a GPU. Where ``$OUT`` is set (the
device tool), the archives are left there too; ``record.py unpack FOLDER... --record RECORD`` puts them in the record
and renders the whole summary.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PART_SECONDS = 570  # 9.5 minutes of wall a part: a device call's ten, less its transfers
PACK_SECONDS = 15  # kept back at the end of a part for the copies, the summary and the archive
UNSEEN = ("d64-none-ragged", "d128-gqa8-none-ragged")  # ranker buckets no shipped entry holds
NEW_BUCKET = "d128-gqa4-clamp-long"
EXAMPLES = (("pallas_matmul", "m4096"), ("triton_softmax", "r16k-c4096"), ("jax_matmul", "m512"))


@dataclass(frozen=True)
class Step:
    """One command of the record: what it measures is named by ``name``; ``cache`` names the user cache it runs
    with (a fresh name is a cold cache), ``out`` the sweep folder whose journals and tables are kept."""

    name: str
    argv: tuple[str, ...]
    timeout_s: int
    cache: str = "main"
    out: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    fresh_cache: bool = False  # empty the cache first: a cold run


def _sweep(name: str, out: str, *args: str, cache: str, timeout: int, fresh: bool) -> Step:
    argv = ("{python}", "-m", "kerneltune", "sweep", "ranker-attention", "--space",
            "search_spaces/ranker_attention_unseen.toml", *args, "--out", "{work}/out/" + out)
    return Step(name, argv, timeout, cache=cache, out=out, fresh_cache=fresh)


def _unseen_sweep(name: str, cache: str, fresh: bool) -> Step:
    buckets = [a for b in UNSEEN for a in ("--bucket", b)]
    return _sweep(name, name, *buckets, cache=cache, timeout=150, fresh=fresh)


def _example_steps(example: str, bucket: str) -> list[Step]:
    src = f"examples/{example}.py"
    out = f"{example}"
    return [
        Step(f"{example}-sweep", ("{python}", "-m", "kerneltune", "sweep", src, "--bucket", bucket, "--out",
                                  "{work}/out/" + out), 120, out=out),
        Step(f"{example}-install",
             ("bash", "-c", f"{{python}} -m kerneltune install {{work}}/out/{out}/tables/*/*.json"), 30),
        Step(f"{example}-verify", ("{python}", "-m", "kerneltune", "verify", src, "--junit",
                                   "{raw}/" + example + "-verify.xml"), 90),
        Step(f"{example}-probe", ("{python}", ".ci/gpu_record/probe.py", example, bucket), 90),
    ]


def plan(part: int) -> list[Step]:
    """The steps of one part, in the order they run (what matters most first: a cut part loses its tail)."""
    env = Step("env", ("bash", "-c", "nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                       "power.draw,temperature.gpu --format=csv; {python} -c 'import jax, torch, triton, optuna; "
                       "print(\"jax\", jax.__version__, jax.devices(), \"torch\", torch.__version__, \"triton\", "
                       "triton.__version__, \"optuna\", optuna.__version__)'"), 60)
    if part == 1:  # time to a tuned table (issue 82's targets) and the first of three cold sweeps
        return [env,
                _unseen_sweep("sweep-cold-1", "cold-1", fresh=True),
                _unseen_sweep("sweep-warm", "cold-1", fresh=False),  # the same builds, a new folder
                _sweep("new-bucket-cold", "new-bucket-cold", "--bucket", NEW_BUCKET, "--strategy", "tpe",
                       "--budget", "12", cache="new-bucket", timeout=100, fresh=True),
                Step("verify-cold", ("{python}", "-m", "kerneltune", "verify", "ranker-attention", "--junit",
                                     "{raw}/verify-cold.xml"), 170, cache="verify", fresh_cache=True),
                Step("verify-warm", ("{python}", "-m", "kerneltune", "verify", "ranker-attention", "--junit",
                                     "{raw}/verify-warm.xml"), 120, cache="verify")]
    if part == 2:  # trust: two more cold sweeps; the examples on the GPU
        return [env, _unseen_sweep("sweep-cold-2", "cold-2", fresh=True),
                _unseen_sweep("sweep-cold-3", "cold-3", fresh=True),
                *[s for ex, bucket in EXAMPLES for s in _example_steps(ex, bucket)]]
    if part == 3:  # the GPU tests, then the ranker against cuDNN and FlexAttention
        return [env,
                Step("test-gpu", ("make", "test-gpu", "PYTHON={python}"), 330),
                Step("bench", ("{python}", "-m", "kerneltune", "bench", "ranker-attention", "--out", "{raw}/bench",
                               "--resume"), 240)]
    raise ValueError(f"PART={part}: one of 1, 2, 3")


def command_line(step: Step, python: str, work: Path, raw: Path) -> list[str]:
    return [a.format(python=python, work=work, raw=raw) for a in step.argv]


def step_env(step: Step, work: Path) -> dict[str, str]:
    """The environment a step runs in: this tree first on the path, then the carried wheels; the user's tables and
    cache folders of the record's own, never the machine's."""
    site = os.environ.get("GPU_RECORD_SITE", "/tmp/site")
    path = os.pathsep.join(p for p in (str(ROOT), site, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            "KERNELTUNE_TABLES": str(work / "tables"), "KERNELTUNE_CACHE": str(work / "cache" / step.cache),
            **step.env}


def install_wheels(site: str) -> str:
    """The carried wheels (``make gpu-wheels``) into ``site``; a machine that has them all needs none."""
    wheels = sorted(str(p) for p in (ROOT / ".whl").glob("*.whl"))
    if not wheels:
        return "no .whl/ folder: the machine's own packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", site, *wheels], check=True)
    return f"{len(wheels)} wheels into {site}"


def run_part(part: int, raw: Path, work: Path, python: str, deadline: float) -> None:
    """Run one part's steps into ``raw`` (its console files, steps.jsonl and the sweeps' journals and tables)."""
    raw.mkdir(parents=True, exist_ok=True)
    log = raw / "steps.jsonl"
    for step in plan(part):
        left = deadline - time.monotonic() - PACK_SECONDS
        if left < 5:
            _append(log, {"name": step.name, "skipped": "the part's 9.5 minutes were spent"})
            continue
        cache = work / "cache" / step.cache
        if step.out:  # a sweep starts in an empty folder: nothing resumed from an earlier run on this machine
            shutil.rmtree(work / "out" / step.out, ignore_errors=True)
        if step.fresh_cache:
            shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        argv = command_line(step, python, work, raw)
        limit = int(min(step.timeout_s, left))
        started = time.monotonic()
        with open(raw / f"{step.name}.txt", "w", encoding="utf-8") as console:
            try:
                rc = subprocess.run(argv, cwd=ROOT, env=step_env(step, work), stdout=console,
                                    stderr=subprocess.STDOUT, timeout=limit).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        wall = time.monotonic() - started
        _append(log, {"name": step.name, "argv": argv, "rc": rc, "wall_s": round(wall, 2), "timeout_s": limit,
                      "cold_cache": step.fresh_cache, "cache": step.cache})
        print(f"gpu-record part {part}: {step.name} rc={rc} {wall:.1f} s", flush=True)
        if step.out:
            _keep(work / "out" / step.out, raw / step.name)


def _append(path: Path, item: Mapping[str, object]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(item) + "\n")


def _keep(out: Path, dest: Path) -> None:
    """A sweep's journals and tables, beside its console."""
    for pattern in ("journals/*.jsonl", "tables/*/*.json"):
        for f in out.glob(pattern):
            target = dest / f.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)


def _commit() -> str:
    given = os.environ.get("GPU_RECORD_COMMIT")
    if given:
        return given
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git here: set GPU_RECORD_COMMIT)"


def record_folder(date: str | None = None) -> Path:
    return ROOT / "results" / "gpu-record" / (date or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"))


def main(argv: Sequence[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).parent))
    import summary

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("run", help="measure (PART=1|2|3, or all three)")
    run.add_argument("--part", type=int, action="append", help="1, 2 or 3 (repeatable; default all)")
    run.add_argument("--record", type=Path, help="default results/gpu-record/<today>")
    run.add_argument("--work", type=Path, default=Path("/tmp/kt-gpu-record"))
    un = sub.add_parser("unpack", help="put a device call's partN.tgz files into the record and render it")
    un.add_argument("folders", type=Path, nargs="+")
    un.add_argument("--record", type=Path, required=True)
    sub.add_parser("plan", help="print every step's command line")
    render = sub.add_parser("render", help="render RECORD/summary.md from its partN.tgz")
    render.add_argument("record", type=Path)
    args = parser.parse_args(argv)

    if args.verb == "plan":
        for part in (1, 2, 3):
            for s in plan(part):
                print(f"part {part} {s.name}: {' '.join(command_line(s, 'python3', Path('WORK'), Path('RAW')))}")
        return 0
    if args.verb == "render":
        summary.write(args.record)
        return 0
    if args.verb == "unpack":
        args.record.mkdir(parents=True, exist_ok=True)
        for folder in args.folders:
            for tgz in sorted(folder.glob("part*.tgz")):
                shutil.copy2(tgz, args.record / tgz.name)
        summary.write(args.record)
        print(f"gpu-record: {args.record / 'summary.md'}")
        return 0

    parts = args.part or [1, 2, 3]
    record = args.record or record_folder()
    record.mkdir(parents=True, exist_ok=True)
    site = os.environ.get("GPU_RECORD_SITE", "/tmp/site")
    meta = {"commit": _commit(), "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "wheels": install_wheels(site), "python": sys.executable}
    for part in parts:
        deadline = time.monotonic() + PART_SECONDS
        raw = args.work / "raw" / f"part{part}"
        shutil.rmtree(raw, ignore_errors=True)
        raw.mkdir(parents=True)
        (raw / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        run_part(part, raw, args.work, sys.executable, deadline)
        with tarfile.open(record / f"part{part}.tgz", "w:gz") as t:
            t.add(raw, arcname=f"part{part}")
        summary.write(record)
        out = os.environ.get("OUT")
        if out:  # the device tool brings back at most 8 files, 2 folders down: an archive and the summary a part
            shutil.copy2(record / f"part{part}.tgz", Path(out) / f"part{part}.tgz")
            shutil.copy2(record / "summary.md", Path(out) / f"summary-part{part}.md")
    print((record / "summary.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
