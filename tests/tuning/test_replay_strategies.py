"""On the journals recorded on the H200 (run C: one shared study, a journal per worker), TPE with a
quarter of the budget finds a config within 3%
of the exhaustive best in every bucket the journal covers."""

import pytest

from kerneltune.tuning.runners import ReplayRunner
from kerneltune.tuning.sweep import SweepOptions, run_sweep

from ..paths import RESULTS

JOURNAL = RESULTS / "ranker_attention/2026-11-30-h200x2-sweep-c"
# The space run C's landscape is replayed on (the default space before the persistent grid).
SPACE = JOURNAL / "replay-space.toml"
BUCKETS = ("d128-tanh-long", "d128-none-long", "d128-gqa-tanh-short", "d64-tanh-many-rows")
RECORDS = list(ReplayRunner(JOURNAL).recorded.values())


def exhaustive_best(bucket):
    return min(r["timing"]["median_us"] for r in RECORDS if r["bucket"] == bucket and r["status"] == "ok")


@pytest.mark.parametrize("strategy", ["tpe", "random", "cmaes", "gp"])
def test_strategies_replay(tmp_path, strategy):
    results = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACE,
                                     out=tmp_path, buckets=BUCKETS, strategy=strategy, budget=3, seed=0,
                                     replay=JOURNAL))
    for r in results:
        assert r.measured == 3 and r.entry is not None


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_tpe_quarter_budget_within_3_percent(tmp_path, seed):
    feasible = {b: sum(1 for r in RECORDS if r["bucket"] == b and r["status"] != "constraint") for b in BUCKETS}
    for bucket in BUCKETS:
        [r] = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACE,
                                     out=tmp_path / bucket, buckets=(bucket,), strategy="tpe",
                                     budget=feasible[bucket] // 4, seed=seed, replay=JOURNAL))
        assert r.entry["median_us"] <= 1.03 * exhaustive_best(bucket), (bucket, r.entry["config"])
