"""Without 4 AMD GPUs, `kerneltune sweep drafter-wide` compiles every layout offline in isolated
workers, ranks them by the cost model (beside the older static score), journals them, and says that
timings need the GPUs."""

import json
import subprocess
import sys

import pytest

from kerneltune.report.frame import load_frame

from ...paths import REPO


@pytest.mark.slow
def test_compile_only_sweep_of_two_layouts(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", "drafter-wide", "--bucket", "mi300x-4req-x4tok",
                        "--budget", "2", "--out", str(tmp_path), "--compile-timeout", "300", "--compile-only"],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "timings need 4 AMD MI300X (gfx942) or MI355X (gfx950) GPUs" in " ".join(r.stdout.split())
    recs = [json.loads(line) for line in (tmp_path / "journals/drafter_wide-live.jsonl").read_text().splitlines()]
    ranked = [x for x in recs if x["status"] == "ok"]
    assert len({x["key"] for x in ranked}) == 2
    for x in ranked:
        s = x["static"]
        assert s["vgpr"] > 0 and s["vgpr_spill"] == 0 and s["lds_bytes"] == 4 * s["pool_words"]
        assert s["blocks"] <= s["resident_blocks"] and s["isa_score"] > 0 and s["isa_mfma"] > 0
        # Ranked by the cost model's µs per step, journaled as modelled (never a measurement).
        assert x["modelled"]["modelled"] is True and x["score"] == x["modelled"]["us_per_layer"]
        assert "timing" not in x
    # The exhaustive order takes w_na 16 and 32 at ng=192, threads=256: the static score ranks one attention
    # block per request (w_na=16) first, the model last (each request's KV window streamed by one CU).
    by_model = [x["tiles"]["w_na"] for x in sorted(ranked, key=lambda x: x["score"])]
    by_isa = [x["tiles"]["w_na"] for x in sorted(ranked, key=lambda x: x["static"]["isa_score"])]
    assert by_model == [32, 16] and by_isa == [16, 32]
    # The model's ranking is printed beside the static score's (an 80-column table: headers fold mid-word).
    assert "modelled, not measured" in " ".join(r.stdout.split()), r.stdout[-3000:]
    frame = load_frame(tmp_path / "journals")
    assert len(frame[frame.status == "ok"]) == 2


def test_a_timed_sweep_and_verify_say_what_hardware_they_need(tmp_path):
    for args in (["sweep", "drafter-wide", "--out", str(tmp_path)], ["verify", "drafter-wide"]):
        r = subprocess.run([sys.executable, "-m", "kerneltune", *args], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2 and len(lines) == 1 and not r.stdout.strip(), r.stdout + r.stderr
        assert "4 AMD MI300X (gfx942) or MI355X (gfx950) GPUs" in lines[0]
