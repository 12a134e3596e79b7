"""On a Hopper GPU: every baseline runs on a small shape and agrees with its reference."""

import pytest

from kerneltune.bench.ranker_attention import BASELINES, run_bench
from kerneltune.tuning.measure import MeasureSettings

SHAPES = """
[[shapes]]
name = "small"
problem = { batch = 4, seq_len = 1024, q_heads = 4, kv_heads = 2, head_dim = 128 }
bounds = { history = [700, 700], candidates = 128 }

[caps]
tanh = 30.0
none = 0.0
"""


@pytest.mark.gpu
def test_every_baseline_runs_and_agrees(tmp_path):
    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)
    path, rows = run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3))
    assert path.exists()
    assert not [r for r in rows if "error" in r], [r.get("error") for r in rows]
    for r in rows:
        assert r["rel_error"] < 2e-2 and r["median_ms"] > 0
    assert {r["impl"] for r in rows} == {"kerneltune", *BASELINES}
