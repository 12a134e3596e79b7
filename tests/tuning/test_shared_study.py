"""Four replay workers share one study on PostgreSQL; one is killed mid-trial. Every candidate is
measured exactly once, the dead worker's trials are retried once, and the merged table equals a
single worker's."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from kerneltune.seams.registry import load_kernel
from kerneltune.tuning.journal import Journal
from kerneltune.tuning.replay import ReplayRunner
from kerneltune.tuning.sweep import ReplayOptions, SweepOptions, run_sweep

from ..paths import FIXTURES, REPO, SPACES

PG_URL = os.environ.get("KERNELTUNE_TEST_PG_URL")
# Run F's sweep of the default space (a journal per worker).
JOURNAL = FIXTURES / "ranker_attention/run-f-journals"
BUCKET = "d128-tanh-long"

pytestmark = pytest.mark.skipif(
    not PG_URL, reason="needs a PostgreSQL server: KERNELTUNE_TEST_PG_URL (.ci/run starts one on loopback)")


def worker(out, study, name):
    cmd = [sys.executable, "-m", "kerneltune", "sweep", "ranker-attention", "--replay", str(JOURNAL),
           "--replay-seconds", "0.7", "--storage", PG_URL, "--study", study, "--worker", name, "--heartbeat", "1",
           "--bucket", BUCKET, "--out", str(out)]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def measured(path):
    return [r for r in Journal(path).records() if r["status"] != "constraint"] if path.exists() else []


def test_four_workers_one_killed_mid_trial(tmp_path):
    import optuna

    study = f"test-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "shared"
    procs = {f"w{i}": worker(out, study, f"w{i}") for i in range(4)}
    victim = out / "journals" / "ranker_attention-replay-w1.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not measured(victim):
        time.sleep(0.05)
    assert measured(victim), "worker w1 never finished a trial"
    time.sleep(0.2)  # now inside its next 0.7 s trial
    os.killpg(procs["w1"].pid, signal.SIGKILL)
    for name, p in procs.items():
        if name != "w1":
            assert p.wait(timeout=180) == 0, p.stderr.read().decode()[-2000:]

    records = [r for path in (out / "journals").glob("*.jsonl") for r in measured(path)]
    keys = Counter(r["key"] for r in records)
    recorded = ReplayRunner(JOURNAL, config_defaults=load_kernel("ranker_attention").config_defaults).recorded.items()
    feasible = {k for (b, k), r in recorded if b == BUCKET and r["status"] != "constraint"}
    answered = {r["key"] for r in records if r["status"] != "unsupported"}
    assert answered == feasible and set(keys.values()) == {1}
    # Run F's journals predate static_max, cap_impl, exp2_fma_eighths and lazy_rescale: their configs are the ones
    # they cannot answer.
    unanswerable = [json.loads(r["key"]) for r in records if r["status"] == "unsupported"]
    assert unanswerable and all(k["static_max"] or k["cap_impl"] != "exact" or k["exp2_fma_eighths"]
                                or k["lazy_rescale"] for k in unanswerable)

    storage = optuna.storages.RDBStorage(PG_URL)
    trials = optuna.load_study(study_name=f"{study}:{BUCKET}:queue", storage=storage).get_trials()
    # The victim held the trial it measured and, compiling ahead, the next one: both come back once.
    retried = [t for t in trials if "failed_trial" in t.system_attrs]
    unsupported = {r["key"] for r in records if r["status"] == "unsupported"}
    assert 1 <= len(retried) <= 2 and all(
        t.state == optuna.trial.TrialState.COMPLETE
        or (t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("key") in unsupported) for t in retried)

    single = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACES / "ranker_attention.toml",
                                    out=tmp_path / "single", buckets=(BUCKET,), replay=ReplayOptions(JOURNAL)))[0].entry
    shared = json.loads((out / "tables/nvidia-h200/ranker_attention.json").read_text())["entries"]
    [entry] = shared.values()
    assert entry == {k: v for k, v in single.items() if k != "table"}
