"""A shared-study worker compiles ahead: while it measures one trial it already holds the next and
has asked its runner to compile it (SQLite storage, no server needed)."""

import concurrent.futures as cf
import os
import threading
import time
import uuid
import warnings

import pytest

from kerneltune.seams.settings import MeasureSettings
from kerneltune.seams.wire import MeasureReply, Status, candidate_request
from kerneltune.tuning.journal import Journal, config_key
from kerneltune.tuning.shared_study import QueueWorker, make_storage, prepare_queue, study_name
from kerneltune.tuning.space import Space

PG_URL = os.environ.get("KERNELTUNE_TEST_PG_URL")


class RecordingRunner:
    compiles_ahead = 1

    def __init__(self, storage):
        self.storage = storage
        self.events = []

    def prefetch(self, req, route):
        self.events.append(("compile", req.config["work"]))

    def measure(self, req, route=0):
        running = [t for s in self.storage.get_all_studies()
                   for t in self.storage.get_all_trials(s._study_id) if t.state.name == "RUNNING"]
        self.events.append(("measure", req.config["work"], len(running)))
        done = cf.Future()
        done.set_result(MeasureReply(Status.OK, timing={"median_us": 10.0 + req.config["work"], "spread": 0.0,
                                                        "samples": 1}))
        return done


def _request(tiles):
    return candidate_request("fake", "b", {}, tiles, {}, 0, MeasureSettings())


def _record(tiles, reply):
    return {"bucket": "b", "key": config_key(tiles), "tiles": tiles, **reply.to_json()}


def _queue(tmp_path, works, heartbeat):
    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=heartbeat)
    space = Space(path=tmp_path / "s.toml", kernel="fake", params={"mode": ["good"], "work": list(works)},
                  constraints=(), buckets=())
    study = prepare_queue(storage, study_name("t", "b"), space, [{"mode": "good", "work": w} for w in works])
    return storage, space, study



def test_the_next_trial_is_held_and_compiled_while_one_is_measured(tmp_path):
    storage, space, study = _queue(tmp_path, (1, 2, 3, 4), heartbeat=1.0)
    runner = RecordingRunner(storage)
    journal = Journal(tmp_path / "j.jsonl")
    n = QueueWorker(study, storage, space.params, runner, heartbeat=1.0).run(
        _request, lambda tiles, reply, trial: journal.append(_record(tiles, reply)))
    assert n == 4 and sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3, 4]
    # Each trial after the first is handed over to compile before the one before it is measured; two trials
    # are held (RUNNING) during every measurement but the last.
    assert runner.events == [("compile", 1), ("compile", 2), ("measure", 1, 2), ("compile", 3), ("measure", 2, 2),
                             ("compile", 4), ("measure", 3, 2), ("measure", 4, 1)]


def test_a_worker_holds_as_many_trials_ahead_as_its_runner_compiles_at_once(tmp_path):
    """With 3 compiles at once (three compile workers), 1 + 3 trials are held and handed over before the first
    is measured, and one more after each measurement: with one ahead, 14 compile workers compiled two at a time."""
    storage, space, study = _queue(tmp_path, (1, 2, 3, 4, 5, 6), heartbeat=1.0)
    runner = RecordingRunner(storage)
    runner.compiles_ahead = 3
    journal = Journal(tmp_path / "j.jsonl")
    n = QueueWorker(study, storage, space.params, runner, heartbeat=1.0).run(
        _request, lambda tiles, reply, trial: journal.append(_record(tiles, reply)))
    assert n == 6 and sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3, 4, 5, 6]
    assert runner.events == [("compile", 1), ("compile", 2), ("compile", 3), ("compile", 4), ("measure", 1, 4),
                             ("compile", 5), ("measure", 2, 4), ("compile", 6), ("measure", 3, 4),
                             ("measure", 4, 3), ("measure", 5, 2), ("measure", 6, 1)]


@pytest.mark.parametrize("server", ["sqlite", "postgresql"])
def test_a_trial_whose_worker_died_before_its_first_heartbeat_is_queued_again(tmp_path, server):
    # CI, run G: a worker killed between taking a trial and recording its first heartbeat left a
    # RUNNING trial that Optuna's fail_stale_trials never fails (no heartbeat, so never stale), and
    # the other workers waited for it forever.
    import optuna

    if server == "postgresql" and not PG_URL:
        pytest.skip("needs a PostgreSQL server: KERNELTUNE_TEST_PG_URL (.ci/run starts one on loopback)")
    url = PG_URL if server == "postgresql" else f"sqlite:///{tmp_path / 'study.db'}"
    storage = make_storage(url, heartbeat=1.0)
    space = Space(path=tmp_path / "s.toml", kernel="fake", params={"mode": ["good"], "work": [1, 2, 3]},
                  constraints=(), buckets=())
    study = prepare_queue(storage, study_name(f"t-{uuid.uuid4().hex[:8]}", "b"), space,
                          [{"mode": "good", "work": w} for w in (1, 2, 3)])
    dists = {n: optuna.distributions.IntDistribution(0, len(v) - 1) for n, v in space.params.items()}
    with pytest.warns(UserWarning, match="Heartbeat of storage"):  # a trial asked outside the queue's claim
        orphan = study.ask(dists)  # the dead worker's trial: RUNNING, no heartbeat ever
    journal = Journal(tmp_path / "j.jsonl")
    measured = []
    queue = QueueWorker(study, storage, space.params, RecordingRunner(storage), heartbeat=1.0)
    worker = threading.Thread(daemon=True, target=lambda: measured.append(queue.run(
        _request, lambda tiles, reply, trial: journal.append(_record(tiles, reply)))))
    worker.start()
    worker.join(timeout=30)
    assert measured == [3], "the worker still waits for the dead worker's trial"
    assert sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3]
    assert storage.get_trial(orphan._trial_id).state.name == "FAIL"


def test_the_trial_held_ahead_keeps_its_heartbeat_while_the_one_before_is_journaled(tmp_path):
    # CI, 2026-12-04: on a loaded machine the trial held ahead got no heartbeat between one measurement's
    # end and the next's start; another worker failed it as stale and its own worker died on
    # "Cannot tell a FAIL trial.".
    import optuna

    storage, space, study = _queue(tmp_path, (1, 2, 3), heartbeat=0.5)  # grace period 2 s
    journal = Journal(tmp_path / "j.jsonl")

    def slow_journal(tiles, reply, trial):
        if tiles["work"] == 1:
            time.sleep(storage.grace_period + 1.5)  # SQLite keeps heartbeats to the second
            optuna.storages.fail_stale_trials(study)  # what another worker's next claim does
        journal.append(_record(tiles, reply))

    runner = RecordingRunner(storage)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = QueueWorker(study, storage, space.params, runner, heartbeat=0.5).run(
            _request, slow_journal)
    assert n == 3 and sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3]
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE"] * 3


def test_a_trial_failed_as_stale_under_its_worker_is_journaled_and_the_worker_goes_on(tmp_path, caplog):
    storage, space, study = _queue(tmp_path, (1, 2), heartbeat=1.0)

    class ReapedRunner(RecordingRunner):
        def measure(self, req, route=0):
            if req.config["work"] == 1:  # another worker took this trial for dead while it was measured
                trial = next(t for t in study.get_trials() if t.state.name == "RUNNING" and t.params["work"] == 0)
                storage.set_trial_state_values(trial._trial_id, state=trial.state.FAIL)
            return super().measure(req, route)

    journal = Journal(tmp_path / "j.jsonl")
    with caplog.at_level("WARNING", logger="kerneltune.shared_study"):
        n = QueueWorker(study, storage, space.params, ReapedRunner(storage), heartbeat=1.0).run(
            _request, lambda tiles, reply, trial: journal.append(_record(tiles, reply)))
    assert n == 2 and sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2]
    assert "trial 0 was failed as stale by another worker" in caplog.text
    assert [t.state.name for t in study.get_trials()] == ["FAIL", "COMPLETE"]
