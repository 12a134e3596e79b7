"""A shared-study worker compiles ahead: while it measures one trial it already holds the next and
has asked its runner to compile it (SQLite storage, no server needed)."""

import concurrent.futures as cf
import os
import threading
import uuid

import pytest

from kerneltune.tuning.journal import Journal
from kerneltune.tuning.shared_study import QueueWorker, make_storage, prepare_queue, study_name
from kerneltune.tuning.space import Space

PG_URL = os.environ.get("KERNELTUNE_TEST_PG_URL")


class RecordingRunner:
    def __init__(self, storage):
        self.storage = storage
        self.events = []

    def prefetch(self, req, route):
        self.events.append(("compile", req["tiles"]["work"]))

    def measure(self, req, route=0):
        running = [t for s in self.storage.get_all_studies()
                   for t in self.storage.get_all_trials(s._study_id) if t.state.name == "RUNNING"]
        self.events.append(("measure", req["tiles"]["work"], len(running)))
        done = cf.Future()
        done.set_result({"status": "ok", "timing": {"median_us": 10.0 + req["tiles"]["work"],
                                                    "spread": 0.0, "samples": 1}})
        return done


def test_the_next_trial_is_held_and_compiled_while_one_is_measured(tmp_path):
    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=1.0)
    space = Space(path=tmp_path / "s.toml", kernel="fake", params={"mode": ["good"], "work": [1, 2, 3, 4]},
                  constraints=(), buckets=())
    study = prepare_queue(storage, study_name("t", "b"), space, [{"mode": "good", "work": w} for w in (1, 2, 3, 4)])
    runner = RecordingRunner(storage)
    journal = Journal(tmp_path / "j.jsonl")
    n = QueueWorker(study, storage, space.params, runner, heartbeat=1.0).run(
        lambda tiles: {"tiles": tiles}, lambda tiles, reply, trial: journal.append({"tiles": tiles, **reply}))
    assert n == 4 and sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3, 4]
    # Each trial after the first is compiled while the one before it is measured; two trials are
    # held (RUNNING) during every measurement but the last.
    assert runner.events == [("compile", 2), ("measure", 1, 2), ("compile", 3), ("measure", 2, 2),
                             ("compile", 4), ("measure", 3, 2), ("measure", 4, 1)]


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
        lambda tiles: {"tiles": tiles}, lambda tiles, reply, trial: journal.append({"tiles": tiles, **reply}))))
    worker.start()
    worker.join(timeout=30)
    assert measured == [3], "the worker still waits for the dead worker's trial"
    assert sorted(r["tiles"]["work"] for r in journal.records()) == [1, 2, 3]
    assert storage.get_trial(orphan._trial_id).state.name == "FAIL"
