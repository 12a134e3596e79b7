"""On the journals recorded on the H200 (run C: one shared study, a journal per worker), TPE with a
quarter of the budget finds, over 20 seeds, a config within 3% of the exhaustive best on average
and within 5% at worst in every bucket the journal covers; the same seed proposes the same configs."""

import pytest

from kerneltune.tuning.journal import Journal
from kerneltune.tuning.replay import ReplayRunner
from kerneltune.tuning.sweep import ReplayOptions, SearchOptions, SweepOptions, run_sweep

from ..paths import FIXTURES

JOURNAL = FIXTURES / "ranker_attention/run-c-journals"
# The space run C's landscape is replayed on (the default space before the persistent grid).
SPACE = FIXTURES / "ranker_attention/run-c-space.toml"
BUCKETS = ("d128-tanh-long", "d128-none-long", "d128-gqa-tanh-short", "d64-tanh-many-rows")
RECORDS = list(ReplayRunner(JOURNAL).recorded.values())


def exhaustive_best(bucket):
    return min(r["timing"]["median_us"] for r in RECORDS if r["bucket"] == bucket and r["status"] == "ok")


@pytest.mark.parametrize("strategy", ["tpe", "random", "cmaes", "gp"])
def test_strategies_replay(tmp_path, strategy):
    results = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACE,
                                     out=tmp_path, buckets=BUCKETS, search=SearchOptions(strategy, budget=3, seed=0),
                                     replay=ReplayOptions(JOURNAL)))
    for r in results:
        assert r.measured == 3 and r.entry is not None


@pytest.mark.slow  # 80 sweeps of sequential TPE: about 10 s
def test_tpe_quarter_budget_near_the_exhaustive_best(tmp_path):
    """Sequential TPE (a replay answers before the next proposal) on run C's landscape: in d64-tanh-many-rows
    it lands on the best group or on the one 4.3% behind it, depending on the seed (a mean of 1.020 over
    these seeds, where Optuna's random sampler gets 1.024 and TPE with 500 asks per proposal 1.022)."""
    feasible = {b: sum(1 for r in RECORDS if r["bucket"] == b and r["status"] != "constraint") for b in BUCKETS}
    for bucket in BUCKETS:
        ratios = []
        for seed in range(20):
            [r] = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACE,
                                         out=tmp_path / f"{bucket}-{seed}", buckets=(bucket,),
                                         search=SearchOptions("tpe", budget=feasible[bucket] // 4, seed=seed),
                                         replay=ReplayOptions(JOURNAL)))
            ratios.append(r.entry["median_us"] / exhaustive_best(bucket))
        assert sum(ratios) / len(ratios) <= 1.03 and max(ratios) <= 1.05, (bucket, ratios)


def test_the_same_seed_proposes_the_same_configs(tmp_path):
    def proposals(out):
        opts = SweepOptions(kernel="ranker_attention", space_path=SPACE, out=out, buckets=(BUCKETS[3],),
                            search=SearchOptions("tpe", budget=5, seed=7), replay=ReplayOptions(JOURNAL))
        run_sweep(opts)
        return [r["key"] for r in Journal(opts.journal_path).records() if r["status"] != "constraint"]

    first = proposals(tmp_path / "a")
    assert len(first) == 5 and proposals(tmp_path / "b") == first
