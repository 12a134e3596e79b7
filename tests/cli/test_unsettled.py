"""Timings that did not settle are named, with what the host shows of why; a sweep whose timings never settle
says so in one line, and its table's entry says settled: false."""

import json
import os
import subprocess
import sys

from kerneltune.cli.unsettled import causes, unsettled_line

from ..paths import REPO


def timing(converged, **after):
    return {"median_us": 1.0, "converged": converged, "clocks": {"before": {}, "after": after}}


def test_settled_timings_need_no_line():
    assert unsettled_line([timing(True), timing(True)]) is None
    assert unsettled_line([]) is None


def test_the_line_counts_and_names_the_causes_the_host_shows():
    line = unsettled_line([timing(True), timing(False), timing(False, throttle_active=True)], load=9.8, cores=2)
    assert line.startswith("2 of 3 timings did not settle")
    assert "the host's load average is 9.8 on 2 cores" in line and "throttling after 1 of them" in line


def test_a_clock_held_down_is_a_cause_and_a_quiet_host_is_said_to_show_none():
    assert causes([timing(False, sm_mhz="1500", sm_max_mhz="1980")], load=0.1, cores=16) == [
        "the SM clock was below 90% of its maximum after 1 of them"]
    assert causes([timing(False, sm_mhz="1950", sm_max_mhz="1980")], load=0.1, cores=16) == []
    assert "likely cause: none this host shows" in unsettled_line([timing(False)], load=0.0, cores=4)


def test_a_sweep_whose_timings_never_settle_says_so(tmp_path):
    """The drifting clock's samples never agree to 0.1%: every timing runs to its cap unsettled."""
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", f"{REPO}/tests/tuning/drifting.py:KERNEL",
                        "--out", str(tmp_path), "--rel-noise", "0.001", "--max-seconds", "0.05", "--no-playoff",
                        "--no-early-stop", "--compile-workers", "0"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300, env={**os.environ, "COLUMNS": "400", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    assert "2 of 2 timings did not settle (the median's noise stayed above --rel-noise until --max-seconds)" \
        in r.stdout
    entry = json.loads((tmp_path / "tables/cpu/two-costs.json").read_text())["entries"]["n=1"]
    assert entry["settled"] is False


def test_candidates_stopped_early_count_in_the_line():
    """A busy host's line said "3 of 4" where a fifth, stopped early, had been the true winner: it counts now."""
    stopped = {**timing(False), "stopped_early": True}
    line = unsettled_line([timing(True), timing(False), timing(False), timing(False), stopped], load=0.0, cores=2)
    assert line.startswith("4 of 5 timings did not settle (the median's noise stayed above --rel-noise until "
                           "--max-seconds, or until it was stopped early, clearly slower than the best beyond its own "
                           "noise: 1 of them); likely cause: none this host shows.")
