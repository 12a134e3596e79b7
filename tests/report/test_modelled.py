"""A compile-only sweep ranked by the cost model, each candidate with the rank its static score gave it, on the
drafter's offline-compile journal."""

from kerneltune.report.modelled import modelled_ranking
from kerneltune.tuning.journal import Journal

from ..paths import FIXTURES

JOURNAL = FIXTURES / "drafter_wide/offline-compile-2026-12-01/drafter_wide-live.jsonl"


def test_ranked_by_the_model_beside_the_static_scores_rank():
    recs = [r for r in Journal(JOURNAL).records() if r["status"] == "ok" and "modelled" in r]
    bucket = recs[0]["bucket"]
    mine = [r for r in recs if r["bucket"] == bucket]
    rows = modelled_ranking(JOURNAL, bucket, top=len(mine))
    assert [r.rank for r in rows] == list(range(1, len(mine) + 1))
    assert [r.us_per_layer for r in rows] == sorted(r["modelled"]["us_per_layer"] for r in mine)
    assert sorted(r.static_rank for r in rows) == list(range(1, len(mine) + 1))
    best_static = min(mine, key=lambda r: r["static"]["isa_score"])
    assert next(r for r in rows if r.static_rank == 1).config == best_static["tiles"]
    assert len(modelled_ranking(JOURNAL, bucket)) == min(10, len(mine))
    assert modelled_ranking(JOURNAL, "no such bucket") == []
