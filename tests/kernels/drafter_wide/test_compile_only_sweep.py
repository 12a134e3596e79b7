"""Without 4 AMD GPUs, `kerneltune sweep drafter-wide` compiles every layout offline in isolated
workers, ranks them by static metrics, journals them, and says that timings need the GPUs."""

import json
import subprocess
import sys

import pytest

from kerneltune.report.frame import load_frame

from ...paths import REPO


@pytest.mark.slow
def test_compile_only_sweep_of_four_layouts(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", "drafter-wide", "--bucket", "mi300x-4req-x4tok",
                        "--budget", "4", "--out", str(tmp_path), "--compile-timeout", "300", "--compile-only"],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "timings need 4 AMD MI300X (gfx942) or MI355X (gfx950) GPUs" in " ".join(r.stdout.split())
    recs = [json.loads(line) for line in (tmp_path / "journals/drafter_wide-live.jsonl").read_text().splitlines()]
    ranked = [x for x in recs if x["status"] == "ok"]
    assert len({x["key"] for x in ranked}) == 4
    for x in ranked:
        s = x["static"]
        assert s["vgpr"] > 0 and s["vgpr_spill"] == 0 and s["lds_bytes"] == 4 * s["pool_words"]
        assert s["blocks"] <= s["resident_blocks"] and x["score"] > 0
    frame = load_frame(tmp_path / "journals")
    assert len(frame[frame.status == "ok"]) == 4


def test_a_timed_sweep_and_verify_say_what_hardware_they_need(tmp_path):
    for args in (["sweep", "drafter-wide", "--out", str(tmp_path)], ["verify", "drafter-wide"]):
        r = subprocess.run([sys.executable, "-m", "kerneltune", *args], capture_output=True, text=True, cwd=REPO,
                           timeout=120)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2 and len(lines) == 1 and not r.stdout.strip(), r.stdout + r.stderr
        assert "4 AMD MI300X (gfx942) or MI355X (gfx950) GPUs" in lines[0]
