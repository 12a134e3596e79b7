"""Optuna's informational lines show only with --verbose (they follow kerneltune's logger)."""

import subprocess
import sys

from ..paths import FIXTURES, REPO

RUN_C = FIXTURES / "ranker_attention/run-c-journals"
SPACE = FIXTURES / "ranker_attention/run-c-space.toml"


def sweep(tmp_path, *flags):
    return subprocess.run([sys.executable, "-m", "kerneltune", *flags, "sweep", "ranker-attention", "--replay",
                           str(RUN_C), "--space", str(SPACE), "--bucket", "d128-tanh-long", "--strategy", "random",
                           "--budget", "2", "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def test_optuna_is_quiet_unless_verbose(tmp_path):
    quiet = sweep(tmp_path / "q")
    assert quiet.returncode == 0, quiet.stderr
    assert "A new study created" not in quiet.stderr + quiet.stdout
    loud = sweep(tmp_path / "v", "--verbose")
    assert loud.returncode == 0 and "A new study created" in loud.stderr


def _live_tpe(tmp_path, budget):
    from kerneltune.tuning.sweep import SearchOptions, run_sweep

    from .test_sweep import options

    return options(tmp_path, ["good", "slow", "garbage"], search=SearchOptions("tpe", budget, 0)), run_sweep


def test_a_study_log_torn_by_a_full_disk_is_mended_and_the_sweep_resumes(tmp_path, monkeypatch, caplog):
    """A full disk cut the study log mid-line: the resumed sweep cuts the torn tail (Optuna would append after it
    and break every later run), then a log broken inside is set aside and the study rebuilt from the journal."""
    import optuna

    from kerneltune.tuning.journal import Journal

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    opts, run_sweep = _live_tpe(tmp_path, 2)
    run_sweep(opts)
    study_log = opts.journal_path.with_suffix(".optuna.log")
    whole = study_log.read_bytes()
    study_log.write_bytes(whole + whole.splitlines(keepends=True)[-1][:17])  # ENOSPC left part of a line
    opts, run_sweep = _live_tpe(tmp_path, 4)
    with caplog.at_level("WARNING", logger="kerneltune.optuna_log"):
        run_sweep(opts)
    assert "cut a torn last line of 17 bytes" in caplog.text
    keys = [r["key"] for r in Journal(opts.journal_path).records()]
    assert len(keys) == len(set(keys)) == 4

    lines = study_log.read_bytes().splitlines(keepends=True)
    study_log.write_bytes(b"".join([*lines[:3], b'{"op_code": 4, "wor\n', *lines[3:]]))
    opts, run_sweep = _live_tpe(tmp_path, 6)
    caplog.clear()
    with caplog.at_level("WARNING", logger="kerneltune.optuna_log"):
        run_sweep(opts)
    assert ":4: not a study log line; the log is set aside" in caplog.text
    keys = [r["key"] for r in Journal(opts.journal_path).records()]
    assert len(keys) == len(set(keys)) == 6  # every feasible config once
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(study_log)))
    [summary] = optuna.get_all_study_summaries(storage)
    assert summary.n_trials >= 6  # the 4 the journal held, told again, and the 2 measured since
