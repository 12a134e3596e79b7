"""An exhaustive sweep shared by many workers through one Optuna study in a database.

Each bucket's study is a queue: its feasible configs are enqueued once (under a
lock), and every worker pops WAITING trials, which the RDB storage hands out
exactly once. A worker records a heartbeat while it measures; a worker that
dies leaves a trial whose heartbeat goes stale, which ``fail_stale_trials``
marks failed and ``RetryHeartbeatStaleTrialCallback`` enqueues again, once; a worker that
dies between taking a trial and its first heartbeat leaves one Optuna never calls stale, which
``fail_orphans`` treats the same way. A record is
journaled only after its trial is told, so a killed worker leaves no record of
the trial it was measuring, and no candidate is measured twice unless a live worker's heartbeats
come later than the grace period (a warning names the trial; the merge keeps one record).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kerneltune.files.locks import BoundedLock
from kerneltune.files.records import Record, config_key
from kerneltune.seams.protocols import Runner
from kerneltune.seams.wire import MeasureReply, Reply, Request, Status

from .journal import merged_journals
from .space import Space

log = logging.getLogger("kerneltune.shared_study")


@contextlib.contextmanager
def _heartbeats_outside_optimize() -> Iterator[None]:
    """Optuna's heartbeat API, used as documented but from ask/tell rather than ``Study.optimize``: it
    warns that the API is experimental and that heartbeats are meant for ``optimize``. The queue records
    each heartbeat itself (``record_heartbeat`` while it measures), which is what ``optimize`` would do,
    so these two warnings say nothing the user can act on."""
    import optuna

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
        yield


def make_storage(url: str, heartbeat: float) -> Any:
    """The shared RDB storage. Workers starting together race to create Optuna's schema; the
    losers see "already exists" errors and simply connect again."""
    import optuna
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    from .optuna_log import follow_kerneltune_logging

    follow_kerneltune_logging()

    for attempt in range(5):
        try:
            with _heartbeats_outside_optimize():
                return optuna.storages.RDBStorage(
                    url, heartbeat_interval=max(round(heartbeat), 1), grace_period=max(round(3 * heartbeat), 2),
                    heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1),
                )
        except (IntegrityError, ProgrammingError):
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def exclusive(storage: Any, name: str) -> Iterator[None]:
    """One process at a time across hosts: a PostgreSQL advisory lock, else a file lock (SQLite)."""
    from sqlalchemy import text

    engine = storage.engine
    if engine.dialect.name == "postgresql":
        key = zlib.crc32(name.encode())
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    else:
        with BoundedLock(f"{engine.url.database or 'optuna'}.{key_safe(name)}.lock", f"the study {name}"):
            yield


def key_safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def study_name(prefix: str, bucket: str) -> str:
    return f"{prefix}:{bucket}:queue"


def prepare_queue(storage: Any, name: str, space: Space, feasible: list[dict[str, Any]]) -> Any:
    """Create the bucket's study and enqueue every feasible config, once whoever comes first."""
    import optuna

    with exclusive(storage, name):
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize", load_if_exists=True)
        if not study.user_attrs.get("queued"):
            for config in feasible:
                study.enqueue_trial({n: space.params[n].index(config[n]) for n in space.params},
                                    user_attrs={"key": config_key(config)})
            study.set_user_attr("queued", len(feasible))
    return study


def fail_orphans(study: Any, storage: Any) -> int:
    """Fail the RUNNING trials that never recorded a heartbeat and started longer ago than the grace
    period (their worker died between taking them and its first heartbeat), and queue each again
    through the storage's stale-trial callback, as ``fail_stale_trials`` does for stale heartbeats.
    Returns how many it failed."""
    import datetime

    import optuna
    from sqlalchemy import bindparam, text

    old = datetime.datetime.now() - datetime.timedelta(seconds=storage.grace_period)
    running = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
               if t.datetime_start is not None and t.datetime_start < old]
    if not running:
        return 0
    query = text("SELECT trial_id FROM trial_heartbeats WHERE trial_id IN :ids").bindparams(
        bindparam("ids", expanding=True))
    with storage.engine.connect() as conn:
        beating = {row[0] for row in conn.execute(query, {"ids": [t._trial_id for t in running]})}
    retry = storage.get_heartbeat_stale_trial_callback()
    failed = 0
    for trial in running:
        if trial._trial_id in beating:
            continue
        try:
            if not storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker failed it first
        failed += 1
        if retry is not None:
            retry(study, storage.get_trial(trial._trial_id))
    return failed


class _Heartbeat:
    """Records the heartbeats of every trial a worker holds, from the claim to the tell, every interval.

    It beats for the worker's whole run, not only while a trial is measured: a trial held ahead
    (compile-ahead) waits through the tell, journaling and next claim of the one before it, and on a
    loaded machine that gap outlasted the grace period, so another worker failed a live trial as stale
    (CI, 2026-12-04: "Cannot tell a FAIL trial.")."""

    def __init__(self, storage: Any, interval: float):
        self._storage, self._interval = storage, interval
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def hold(self, trial_id: int) -> None:
        with self._lock:
            self._held.add(trial_id)

    def release(self, trial_id: int) -> None:
        with self._lock:
            self._held.discard(trial_id)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                held = list(self._held)
            for trial_id in held:
                self._storage.record_heartbeat(trial_id)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class QueueWorker:
    """One worker's loop over a bucket's shared queue: claim, measure, tell, journal, until the queue is
    empty and no other worker holds a trial.

    While one trial is measured the worker already holds the next ones, as many as its runner compiles at once
    (``Runner.compiles_ahead``, at least one), and has its timing worker compile them: with one held ahead, 14
    compile workers would have compiled two candidates at a time. The heartbeat of every trial it holds is
    recorded from its claim to its tell, so a worker that dies loses them all to the retry.
    """

    def __init__(self, study: Any, storage: Any, params: Mapping[str, list[Any]], runner: Runner,
                 heartbeat: float):
        import optuna

        self.study, self.storage, self.params, self.runner, self.heartbeat = study, storage, params, runner, heartbeat
        self.dists = {n: optuna.distributions.IntDistribution(0, len(v) - 1) for n, v in params.items()}

    def claim(self) -> tuple[Any, dict[str, Any]] | None:
        """The next queued trial, or None when none is waiting now."""
        import optuna

        while True:
            with _heartbeats_outside_optimize():
                optuna.storages.fail_stale_trials(self.study)
            if optuna.trial.TrialState.WAITING not in {t.state for t in self.study.get_trials(deepcopy=False)}:
                return None
            with _heartbeats_outside_optimize():
                trial = self.study.ask(self.dists)
            if "fixed_params" not in self.storage.get_trial(trial._trial_id).system_attrs:
                # Lost the race for the last trial (another worker may already have failed it).
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
                continue
            self.storage.record_heartbeat(trial._trial_id)
            return trial, {n: self.params[n][trial.params[n]] for n in self.params}

    def _tell(self, trial: Any, value: float | None) -> None:
        """Tell a measured trial its median, or FAIL without one. Another worker may already have failed it
        as stale (its heartbeat was late): then the retry queued in its place may measure it again."""
        import optuna

        done = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
        self.study.tell(trial, value, state=done, skip_if_finished=True)
        if self.storage.get_trial(trial._trial_id).state is not done:
            log.warning("trial %d was failed as stale by another worker while this one measured it; its "
                        "measurement is journaled, and the retry queued in its place may measure it again",
                        trial.number)

    def run(self, make_request: Callable[[dict[str, Any]], Request],
            on_reply: Callable[[dict[str, Any], Reply, int], Any]) -> int:
        """Measure trials until the queue is drained; ``on_reply(config, reply, trial number)`` journals
        each after its trial is told. Returns how many this worker measured."""
        import optuna

        measured = 0
        held: deque[tuple[Any, dict[str, Any]]] = deque()  # claimed, in the order they are measured
        depth = 1 + max(self.runner.compiles_ahead, 1)
        with _Heartbeat(self.storage, self.heartbeat) as beats:
            while True:
                while len(held) < depth and (claimed := self.claim()) is not None:
                    beats.hold(claimed[0]._trial_id)
                    self.runner.prefetch(make_request(claimed[1]), 0)
                    held.append(claimed)
                if not held:
                    if fail_orphans(self.study, self.storage):  # only an idle worker needs them back
                        continue
                    states = {t.state for t in self.study.get_trials(deepcopy=False)}
                    if optuna.trial.TrialState.RUNNING not in states:
                        return measured
                    time.sleep(self.heartbeat / 2)  # another worker's trial may still go stale and come back
                    continue
                trial, config = held.popleft()
                reply = self.runner.measure(make_request(config)).result()
                timed = reply.status in (Status.OK, Status.PRUNED) and isinstance(reply, MeasureReply)
                self._tell(trial, reply.median_us if timed else None)
                beats.release(trial._trial_id)
                on_reply(config, reply, trial.number)
                measured += 1


def merged_records(journal_dir: Path, kernel: str, bucket: str) -> list[Record]:
    """Every worker's records of a bucket; one per config, the earliest measurement winning."""
    return [r for (b, _), r in merged_journals(journal_dir).items() if b == bucket and r.kernel == kernel]
