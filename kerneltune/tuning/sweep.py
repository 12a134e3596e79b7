"""One sweep: for each bucket, propose candidates, compile ahead, verify and time, journal, table.

Observers (progress display, logs) get ``on_*`` calls; the sweep itself prints nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kerneltune.kernels.base import TunableKernel, load_kernel
from kerneltune.tables.stamps import now_stamp

from .journal import Journal, config_key, make_record
from .measure import MeasureSettings
from .runners import LiveRunner, ReplayRunner
from .space import Bucket, Space, load_space
from .strategies import Exhaustive
from .table_writer import write_bucket_table

FAILURES = ("constraint", "compile", "runtime", "timeout", "correctness", "unsupported")


class Observer(Protocol):
    def on_bucket_start(self, bucket: str, total: int, done: int) -> None: ...
    def on_record(self, bucket: str, record: dict[str, Any], best_us: float | None, failures: Counter) -> None: ...
    def on_bucket_end(self, bucket: str, entry: dict[str, Any] | None) -> None: ...


@dataclass(frozen=True)
class SweepOptions:
    kernel: str
    space_path: Path
    out: Path
    buckets: tuple[str, ...] = ()
    strategy: str = "exhaustive"
    budget: int | None = None
    seed: int = 0
    gpus: tuple[str, ...] = ("0",)
    replay: Path | None = None
    storage: str | None = None
    study: str | None = None
    resume: bool = True
    compile_threads: int = 4
    lookahead: int = 4
    compile_timeout: float = 600.0
    run_timeout: float = 300.0
    prune_factor: float | None = 1.5
    journal: Path | None = None
    worker: str | None = None
    heartbeat: float = 10.0
    replay_seconds: float = 0.0
    # Rank candidates by the kernel's offline compile (``static_rank``) where it cannot be timed.
    compile_only: bool = False
    settings: MeasureSettings = field(default_factory=MeasureSettings)

    @property
    def journal_path(self) -> Path:
        if self.journal is not None:
            return self.journal
        mode = "replay" if self.replay else "live"
        name = re.sub(r"[^A-Za-z0-9_]+", "_", self.kernel.split(":")[-1] if ":" in self.kernel else self.kernel)
        worker = f"-{re.sub(r'[^A-Za-z0-9_.]+', '_', self.worker)}" if self.worker else ""
        return self.out / "journals" / f"{name}-{mode}{worker}.jsonl"


@dataclass
class BucketResult:
    bucket: str
    measured: int = 0
    skipped: int = 0
    failures: Counter = field(default_factory=Counter)
    best: dict[str, Any] | None = None
    entry: dict[str, Any] | None = None
    static_only: bool = False


def candidate_seed(bucket: str, key: str, seed: int) -> int:
    """Fresh inputs per candidate, reproducible from (bucket, config, sweep seed)."""
    return int.from_bytes(hashlib.sha256(f"{bucket}|{key}|{seed}".encode()).digest()[:4], "little")


def record_value(rec: dict[str, Any]) -> float | None:
    """What a strategy minimises: the median time, or the static score of a compile-only sweep."""
    if rec.get("status") not in ("ok", "pruned"):
        return None
    return rec["timing"]["median_us"] if "timing" in rec else rec.get("score")


def candidate_request(opts: SweepOptions, bucket: Bucket, fields: dict[str, Any], tiles: dict[str, Any],
                      static: bool) -> dict[str, Any]:
    """A worker request for one candidate: fresh tensors per candidate, the bucket's timing bounds."""
    req = {"kernel": opts.kernel, "problem": fields, "tiles": tiles, "bucket": bucket.name,
           "inputs": {**bucket.bounds, "timing_seed": candidate_seed(bucket.name, "timing inputs", opts.seed)},
           "seed": candidate_seed(bucket.name, config_key(tiles), opts.seed), "settings": opts.settings.__dict__}
    if static:
        req["op"] = "static"
    return req


def _storage(opts: SweepOptions) -> Any:
    import optuna

    if opts.storage:
        from .shared_study import make_storage

        return make_storage(opts.storage, opts.heartbeat)
    path = opts.journal_path.with_suffix(".optuna.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))


def run_sweep(opts: SweepOptions, observer: Observer | None = None,
              runner_factory: Callable[[SweepOptions], Any] | None = None) -> list[BucketResult]:
    kernel = load_kernel(opts.kernel)
    space = load_space(opts.space_path, set(kernel.tunables), set(kernel.problem_fields))
    buckets = [space.bucket(b) for b in opts.buckets] if opts.buckets else list(space.buckets)
    if not buckets:
        raise ValueError(f"{opts.space_path}: no [[buckets]] to sweep")
    journal = Journal(opts.journal_path)
    if not opts.resume and journal.path.exists():
        journal.path.rename(journal.path.with_suffix(f".{int(time.time())}.jsonl"))
    runner = runner_factory(opts) if runner_factory else _default_runner(opts, kernel)
    try:
        stamps = runner.stamps()
        static = False
        if opts.replay is None:
            need = kernel.supported_on(stamps)
            if opts.compile_only and not hasattr(kernel, "static_rank"):
                raise ValueError(f"compile_only: {kernel.name} has no offline compile to rank by")
            if need is not None and not opts.compile_only:
                hint = "; --compile-only ranks the candidates by their offline compile" \
                    if hasattr(kernel, "static_rank") else ""
                raise HardwareMissing(f"timing {kernel.name} needs {need}{hint}")
            static = opts.compile_only
        results = [_sweep_bucket(opts, kernel, space, b, journal, runner, stamps, observer, static)
                   for b in buckets]
    finally:
        runner.close()
    return results


class HardwareMissing(RuntimeError):
    """The sweep cannot time here; the message names the hardware it needs."""


def _default_runner(opts: SweepOptions, kernel: TunableKernel) -> Any:
    if opts.replay is not None:
        return ReplayRunner(opts.replay, opts.replay_seconds, kernel.tile_defaults)
    return LiveRunner(opts.gpus, opts.compile_threads, opts.out / "logs", opts.out / "jax-cache",
                      opts.compile_timeout, opts.run_timeout)


def _sweep_bucket(opts: SweepOptions, kernel: TunableKernel, space: Space, bucket: Bucket, journal: Journal,
                  runner: Any, stamps: dict[str, Any], observer: Observer | None, static: bool) -> BucketResult:
    """``static``: no device to time on; candidates are compiled and ranked by the kernel's
    static metrics (its ``static_rank``), and no table is written."""
    problem = kernel.problem(bucket.problem)
    fields = kernel.problem_dict(problem)
    result = BucketResult(bucket.name, static_only=static)
    done = {key: rec for (b, key), rec in journal.done().items() if b == bucket.name}
    feasible: list[dict[str, Any]] = []
    base = {"kernel": kernel.name, "bucket": bucket.name, "problem": fields, "inputs": bucket.bounds, "stamps": stamps,
            "kernel_hash": kernel.source_hash(), "strategy": opts.strategy, "seed": opts.seed}
    for tiles in space.configs(fields):
        key = config_key(tiles)
        why = kernel.infeasibility(problem, tiles)
        if why is None:
            feasible.append(tiles)
        elif key not in done:
            rec = {**base, "key": key, "tiles": tiles, "status": "constraint", "error": why, "time": now_stamp()}
            journal.append(rec)
            done[key] = rec
            result.failures["constraint"] += 1
    if not feasible:
        raise ValueError(f"{space.path}: bucket {bucket.name!r}: no feasible config "
                         f"(every config breaks a constraint or the kernel's static checks)")

    known = {k: record_value(r) for k, r in done.items()}
    if opts.strategy == "exhaustive":
        strategy: Any = Exhaustive(feasible, set(done))
    else:
        import optuna

        from .strategies import OptunaStrategy, make_sampler

        study = optuna.create_study(
            study_name=f"{opts.study or kernel.name}:{bucket.name}:{opts.strategy}:{opts.seed}",
            storage=_storage(opts), sampler=make_sampler(opts.strategy, opts.seed), direction="minimize",
            load_if_exists=True,
        )
        heuristic = kernel.heuristic(problem)
        start = {n: heuristic.get(n, values[0]) for n, values in space.params.items()}
        strategy = OptunaStrategy(study, space.params, feasible, known, opts.seed, start)

    if opts.storage and opts.strategy == "exhaustive":
        return _shared_bucket(opts, kernel, space, bucket, journal, runner, base, feasible, result, observer, static)

    ok_times = [v for k, v in known.items() if v is not None and done[k]["status"] == "ok"]
    best_us = min(ok_times, default=None)
    budget = opts.budget if opts.budget is not None else len(feasible)
    already = sum(1 for t in feasible if config_key(t) in done)
    result.skipped = already
    if observer:
        observer.on_bucket_start(bucket.name, min(budget, len(feasible)), min(already, budget))
    new_budget = max(budget - already, 0) if opts.strategy == "exhaustive" else budget
    proposed = 0
    compiling: list[tuple[dict[str, Any], cf.Future[dict[str, Any]]]] = []
    measuring: dict[cf.Future[dict[str, Any]], dict[str, Any]] = {}

    def request(tiles: dict[str, Any]) -> dict[str, Any]:
        req = candidate_request(opts, bucket, fields, tiles, static)
        if not static and opts.prune_factor and best_us is not None:
            req["prune_above_us"] = best_us * opts.prune_factor
        return req

    while True:
        while proposed < new_budget and len(compiling) < opts.lookahead:
            tiles = strategy.propose()
            if tiles is None:
                new_budget = proposed
                break
            proposed += 1
            compiling.append((tiles, runner.compile(request(tiles))))
        # Hand compiled candidates to free timing workers, in proposal order.
        while compiling and compiling[0][1].done() and len(measuring) < runner.parallel_measures:
            tiles, fut = compiling.pop(0)
            creply = fut.result()
            if creply.get("status") != "ok":
                _finish(journal, strategy, result, observer, base, tiles, creply)
                continue
            mfut = runner.measure(request(tiles), creply.get("route", 0))
            measuring[mfut] = {"tiles": tiles}
        if not compiling and not measuring:
            break
        waiting = list(measuring) + ([compiling[0][1]] if compiling else [])
        finished, _ = cf.wait(waiting, return_when=cf.FIRST_COMPLETED)
        for fut in finished:
            if fut in measuring:
                info = measuring.pop(fut)
                reply = fut.result()
                rec = _finish(journal, strategy, result, observer, base, info["tiles"], reply)
                v = record_value(rec) if rec["status"] == "ok" else None
                if v is not None and (best_us is None or v < best_us):
                    best_us = v
                    result.best = rec
    if not static:
        records = list(journal.records())
        result.entry = write_bucket_table(opts.out, kernel, bucket.name, records, opts.settings.rel_noise)
    if observer:
        observer.on_bucket_end(bucket.name, result.entry)
    return result


def _shared_bucket(opts: SweepOptions, kernel: TunableKernel, space: Space, bucket: Bucket, journal: Journal,
                   runner: Any, base: dict[str, Any], feasible: list[dict[str, Any]], result: BucketResult,
                   observer: Observer | None, static: bool) -> BucketResult:
    """This worker's share of an exhaustive sweep queued in a shared study; the table merges
    the journals of every worker that wrote beside this one."""
    from .shared_study import make_storage, merged_records, prepare_queue, run_queue, study_name

    assert opts.storage is not None
    storage = make_storage(opts.storage, opts.heartbeat)
    study = prepare_queue(storage, study_name(opts.study or kernel.name, bucket.name), space, feasible)
    def request(tiles: dict[str, Any]) -> dict[str, Any]:
        return candidate_request(opts, bucket, base["problem"], tiles, static)

    def on_record(rec: dict[str, Any]) -> None:
        result.measured += 1
        if rec["status"] in FAILURES:
            result.failures[rec["status"]] += 1
        if observer:
            observer.on_record(bucket.name, rec, None, result.failures)

    if observer:
        observer.on_bucket_start(bucket.name, len(feasible), 0)
    run_queue(study, storage, space, kernel, bucket, journal, runner, base, request, opts.heartbeat, on_record)
    records = merged_records(journal.path.parent, kernel.name, bucket.name)
    result.entry = write_bucket_table(opts.out, kernel, bucket.name, records, opts.settings.rel_noise)
    if observer:
        observer.on_bucket_end(bucket.name, result.entry)
    return result


def _finish(journal: Journal, strategy: Any, result: BucketResult, observer: Observer | None,
            base: dict[str, Any], tiles: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    rec = make_record(base, tiles, reply)
    journal.append(rec)
    status = rec["status"]
    result.measured += 1
    if status in FAILURES:
        result.failures[status] += 1
    strategy.observe(tiles, record_value(rec))
    if observer:
        observer.on_record(result.bucket, rec, None, result.failures)
    return rec
