import csv
import io
import re

import pandas as pd
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.report.frame import SCHEMA

from ..paths import FIXTURES

JOURNAL = FIXTURES / "ranker_attention/run-c-journals"
BASELINE = FIXTURES / "ranker_attention/sweep-a-table.json"


def test_csv_columns_follow_the_schema(tmp_path):
    r = CliRunner().invoke(app, ["report", str(JOURNAL), "--csv", str(tmp_path / "r.csv")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "r.csv").read_text()
    df = pd.read_csv(tmp_path / "r.csv")
    shown = [c for c in SCHEMA if c != "score"]  # a compile-only sweep's: left out where no row has one
    assert tuple(df.columns[: len(shown) + 1]) == (*shown[:3], "rank", *shown[3:])
    # Sensible precision (no float noise such as 1019.2080000000001), integers as integers.
    assert max(len(v.split(".")[1]) for v in df["median_us"].dropna().astype(str)) <= 2
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["samples"] for r in rows if r["samples"]} <= {str(n) for n in range(3, 1000)}
    assert {r["config_block_q"] for r in rows} == {"64", "128"} and "30.0" in {r["problem_cap"] for r in rows}
    assert set(df["run"]) == {"run-c-journals"} and set(df["strategy"]) == {"exhaustive"}
    assert {"problem_head_dim", "config_block_q", "config_block_kv"} <= set(df.columns)
    assert set(df["status"]) <= {"ok", "stopped early", "refused", "compile", "runtime", "timeout", "correctness"}
    assert (df.loc[df.status == "ok", "median_us"] > 0).all()


def test_html_is_self_contained_with_charts_tables_and_baseline(tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", str(JOURNAL), "--html", str(out), "--baseline", str(BASELINE)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    # Per bucket: the convergence, the time-by-config scatter and the ranker's tile heat map, drawn by Plotly.
    assert len(set(re.findall(r'id="([^"]+-convergence)"', page))) == 4
    assert len(set(re.findall(r'id="([^"]+-scatter)"', page))) == 4
    assert len(set(re.findall(r'id="([^"]+-view)"', page))) == 4
    assert 'class="ranking"' in page and 'id="failures"' in page and 'class="baseline"' in page
    assert 'id="kernel-ranker_attention"' in page and "(run run-c-journals)" in page
    # Constraint prunes are counted apart from the failures.
    assert "<h3>constraint" not in page and 'id="pruned"' in page and "<summary>132 configs</summary>" in page
    assert "<script src" not in page and 'src="http' not in page  # plotly.js inline: opens offline
    # Integers stay integers (a block size never shows as 128.0) and "slower" is on the fixed scale.
    body = page[page.index("<body>"):]  # after the inline plotly.js
    assert "block_kv=64 " in body and "=128.0" not in body and ">128.0<" not in body and "+0.0%" in body


def test_html_bench_section(tmp_path):
    import json

    bench = {"stamps": {"gpu": "NVIDIA H200"}, "rows": [
        {"shape": "s", "cap_method": "tanh", "impl": "kerneltune", "median_ms": 1.0, "spread": 0.01,
         "useful_tflops": 400.0, "rel_error": 1e-3},
        {"shape": "s", "cap_method": "tanh", "impl": "flex", "median_ms": 2.5, "spread": 0.01,
         "useful_tflops": 160.0, "rel_error": 2e-3},
        {"shape": "s", "cap_method": "tanh", "impl": "jax_mgpu_dense", "error": "ValueError: boom"}]}
    (tmp_path / "b.json").write_text(json.dumps(bench))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", str(JOURNAL), "--html", str(out), "--bench", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert 'class="bench"' in page and ">2.50</td>" in page and "ValueError: boom" in page
    # This result records no targets and names no bench file: the report says so instead of judging.
    assert 'class="targets"' not in page and "no targets" in page and "no targets" in r.output


def test_html_bench_targets_are_shown_with_their_verdicts(tmp_path):
    import json

    bench = {"stamps": {"gpu": "NVIDIA H200"}, "rows": [], "targets": [
        {"target": "FlexAttention with the tanh cap, D=128", "shape": "s", "cap_method": "tanh", "value": 2.1,
         "at_least": 2.5, "verdict": "missed"},
        {"target": "the composite", "shape": "s", "cap_method": "none", "value": 2.6, "at_least": 1.0,
         "verdict": "met"}]}
    (tmp_path / "b.json").write_text(json.dumps(bench))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", str(JOURNAL), "--html", str(out), "--bench", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert 'class="targets"' in page and '<tr class="slower"><td>FlexAttention with the tanh cap, D=128' in page
    assert "<td>2.10</td><td>2.5</td><td>missed</td>" in page and "recorded by the run" in page


def test_a_corrupt_bench_result_is_named(tmp_path):
    (tmp_path / "b.json").write_text('{"rows": [')
    r = CliRunner().invoke(app, ["report", str(JOURNAL), "--bench", str(tmp_path / "b.json")])
    assert r.exit_code == 3 and "b.json" in r.output and "not a readable" in r.output


def test_each_ranking_is_of_one_kernel_source_and_older_sources_are_ranked_apart(tmp_path):
    """A re-sweep of an edited kernel into the same folder: its records rank alone (one config was #1 and #4 when
    both sources ranked together), the older source's apart, and the page shows each ranking's source hash."""
    import json

    def rec(source, work, us, time):
        return {"kernel": "fake", "bucket": "b", "key": f"w{work}", "tiles": {"work": work}, "status": "ok",
                "kernel_hash": source, "time": time, "problem": {"n": 1},
                "timing": {"median_us": us, "spread": 0.01, "samples": 10}, "stamps": {"device_kind": "cpu"}}

    journal = tmp_path / "runs" / "journals" / "fake-live.jsonl"
    journal.parent.mkdir(parents=True)
    records = [rec("old0ld", 1, 100.0, "2026-12-07T10:00:00Z"), rec("old0ld", 2, 120.0, "2026-12-07T10:01:00Z"),
               rec("new1ew", 1, 130.0, "2026-12-07T11:00:00Z"), rec("new1ew", 2, 110.0, "2026-12-07T11:01:00Z")]
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", str(tmp_path / "runs"), "--html", str(out)])
    assert r.exit_code == 0, r.output
    body = out.read_text()
    body = body[body.index("<body>"):]
    ranked = body[body.index('class="ranking"'):body.index("</table>", body.index('class="ranking"'))]
    assert "kernel source <code>new1ew</code>" in body and "1 older source(s) are ranked apart" in body
    assert ranked.count("<tr>") == 3 and ranked.index("110.0") < ranked.index("130.0") and "100.0" not in ranked
    older = body[body.index('class="ranking-older"'):]
    assert "<code>old0ld</code>, ranked apart" in body and "100.0" in older[:older.index("</table>")]


def test_best_so_far_follows_the_order_candidates_were_measured_not_their_rank():
    """A fast sweep measures many candidates a second (the journal's time is whole seconds): the bucket's rows come
    ranked fastest first, and the chart drew the best from candidate 1 although the first took 10x longer."""
    from kerneltune.report.charts import best_so_far

    second = "2026-12-07T23:07:01Z"
    frame = pd.DataFrame({"median_us": [1000.0, 300.0, 100.0, None, 200.0], "strategy": ["exhaustive"] * 5,
                          "time": [second, second, "2026-12-07T23:07:02Z", second, "2026-12-07T23:07:02Z"]})
    ranked = frame.sort_values(["median_us", "time"])  # as the report's bucket hands it over
    assert list(best_so_far(ranked)["exhaustive"]) == [1000.0, 300.0, 100.0, 100.0]


def test_the_csv_ranks_each_bucket_s_candidates_per_kernel_source_failures_after(tmp_path):
    """docs/own-kernel.md: "report ranks each bucket's candidates of the current kernel source (older sources apart)
    in a CSV row per candidate". The rows came in journal order with no rank and an empty score column."""
    import json

    def rec(bucket, work, status="ok", median=None, source="new", time="2026-12-07T23:07:01Z"):
        timing = {"timing": {"median_us": median, "spread": 0.01, "samples": 5}} if median else {}
        return {"kernel": "fake", "bucket": bucket, "key": str(work), "tiles": {"work": work}, "status": status,
                "kernel_hash": source, "time": time, "strategy": "exhaustive", **timing}

    journal = tmp_path / "j.jsonl"
    records = [rec("b", 1, median=30.0), rec("a", 1, "correctness"), rec("b", 2, median=10.0),
               rec("b", 3, "pruned", median=50.0), rec("b", 4, median=5.0, source="old", time="2026-12-06T00:00:00Z"),
               rec("a", 2, median=7.0), rec("b", 5, median=10.0), rec("b", 6, "constraint")]
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = CliRunner().invoke(app, ["report", str(journal), "--csv", str(tmp_path / "r.csv")])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert [(r["bucket"], r["kernel_hash"], r["rank"], r["config_work"]) for r in rows] == [
        ("a", "new", "1", "2"), ("a", "new", "", "1"),
        ("b", "new", "1", "2"), ("b", "new", "1", "5"), ("b", "new", "3", "1"), ("b", "new", "4", "3"),
        ("b", "new", "", "6"), ("b", "old", "1", "4")]
    assert "score" not in rows[0]
