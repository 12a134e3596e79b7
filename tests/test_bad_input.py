"""Every bad input ends in one line on stderr naming the culprit, with exit code 3, and no traceback."""

import json
import os
import subprocess
import sys

import pytest

from .paths import FIXTURES, REPO

RUN_C = FIXTURES / "ranker_attention/run-c-journals"


def kerneltune(*args, cwd=REPO, env=None, umask=None):
    return subprocess.run([sys.executable, "-m", "kerneltune", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env=None if env is None else {**os.environ, **env}, umask=umask or -1)


def one_line(r, code=3):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == code and len(lines) == 1 and "Traceback" not in r.stderr + r.stdout, r.stderr + r.stdout
    return lines[0]


def test_an_out_folder_under_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_line(kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--bucket", "d128-tanh-long",
                               "--space", FIXTURES / "ranker_attention/run-c-space.toml", "--out", blocker / "out"))
    assert str(blocker) in line


def test_a_constraint_that_raises(tmp_path):
    space = tmp_path / "s.toml"
    space.write_text('kernel = "ranker_attention"\n[params]\nblock_q = [64, 128]\n[[constraints]]\n'
                     'expr = "1 // (block_q - 64) >= 0"\n[[buckets]]\nname = "b"\n'
                     'problem = { batch = 1, seq_len = 256, q_heads = 1, kv_heads = 1, head_dim = 64 }\n')
    line = one_line(kerneltune("sweep", "ranker-attention", "--space", space, "--replay", RUN_C, "--out", tmp_path))
    assert "s.toml:5" in line and "ZeroDivisionError" in line and "block_q=64" in line


def test_a_space_value_error_names_file_line_and_bucket(tmp_path):
    space = tmp_path / "s.toml"
    space.write_text('kernel = "ranker_attention"\n[params]\nblock_q = [64]\n[[buckets]]\nname = "odd"\n'
                     'problem = { batch = 1, seq_len = 256, q_heads = 1, kv_heads = 1, head_dim = 48 }\n')
    line = one_line(kerneltune("sweep", "ranker-attention", "--space", space, "--replay", RUN_C, "--out", tmp_path))
    assert "s.toml:4" in line and "bucket 'odd'" in line and "head_dim" in line


def test_a_space_file_of_another_kernel(tmp_path):
    line = one_line(kerneltune("sweep", "ranker-attention", "--space", REPO / "search_spaces/drafter_wide.toml",
                               "--replay", RUN_C, "--out", tmp_path))
    assert "drafter_wide" in line and "ranker_attention" in line


def test_contenders_from_a_missing_table_or_for_a_sampler(tmp_path):
    args = ("sweep", "ranker-attention", "--replay", RUN_C, "--out", tmp_path, "--contenders", tmp_path / "t.json")
    line = one_line(kerneltune(*args))
    assert line.startswith("error: contenders: ") and "t.json: no such table" in line
    assert "samples the space" in one_line(kerneltune(*args, "--strategy", "tpe"))


def test_a_corrupt_journal_line_in_a_report_is_one_warning_and_the_rest_are_used(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_text('{"bucket": "b", "key": "k", "tiles": {}, "status": "compile"}\nnot json\n'
                       '{"bucket": "b", "key": "k2", "tiles": {}, "status": "compile"}\n')
    r = kerneltune("report", journal)
    assert r.returncode == 0 and "2 candidates" in r.stdout and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"{journal}:2: not a JSON line; record skipped"


def test_a_baseline_that_is_not_json_or_of_another_kernel(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("{")
    assert "b.json: not a tuned table" in one_line(kerneltune("report", RUN_C, "--baseline", bad))
    other = tmp_path / "o.json"
    other.write_text(json.dumps({"schema": 1, "kernel": "drafter_wide", "device_kind": "nvidia-h200", "entries": {}}))
    assert "kernel 'drafter_wide'" in one_line(kerneltune("report", RUN_C, "--baseline", other))
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps({"schema": 1, "kernel": "ranker_attention", "device_kind": "nvidia-h100",
                                   "entries": {}}))
    assert "nvidia-h100" in one_line(kerneltune("report", RUN_C, "--baseline", foreign))


def test_the_drafters_compile_only_journal_reports(tmp_path):
    r = kerneltune("report", FIXTURES / "drafter_wide/offline-compile-2026-11-30", "--html",
                   tmp_path / "d.html", "--csv", tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    assert "static score" in (tmp_path / "d.html").read_text()


def test_report_files_go_into_new_folders_and_not_under_a_file(tmp_path):
    r = kerneltune("report", RUN_C, "--csv", tmp_path / "new/r.csv", "--html", tmp_path / "new/r.html")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "new/r.csv").read_text().count("\n") > 1 and (tmp_path / "new/r.html").stat().st_size > 0
    blocker = tmp_path / "file"
    blocker.write_text("")
    for option in ("--csv", "--html"):
        assert str(blocker) in one_line(kerneltune("report", RUN_C, option, blocker / "r"))


def test_an_unknown_kernel_in_every_command():
    for command in ("sweep", "verify", "bench"):
        assert "unknown kernel 'nope'" in one_line(kerneltune(command, "nope"))


@pytest.mark.parametrize("budget", ["0", "-1"])
def test_a_budget_under_one(tmp_path, budget):
    r = kerneltune("sweep", "ranker-attention", "--budget", budget, "--replay", RUN_C, "--out", tmp_path)
    assert f"budget: must be at least 1, got {budget}" in one_line(r)


def test_square_brackets_in_a_message_survive(tmp_path):
    space = tmp_path / "s.toml"
    space.write_text('kernel = "ranker_attention"\n[params]\nblock_q = []\n')
    assert "params.block_q: the list of values is empty" in one_line(
        kerneltune("sweep", "ranker-attention", "--space", space, "--out", tmp_path))
    missing = tmp_path / "[x].toml"
    assert "[x].toml" in one_line(kerneltune("sweep", "ranker-attention", "--space", missing, "--out", tmp_path))


@pytest.mark.parametrize("into", ["shipped", "user"])
def test_a_sweep_never_writes_the_tables_the_runtime_reads(tmp_path, into):
    """Neither the shipped tables (``results/tables`` links to them) nor the user's: installing is explicit."""
    out = REPO / "results" if into == "shipped" else tmp_path
    line = one_line(kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--out", out,
                               "--space", FIXTURES / "ranker_attention/run-c-space.toml",
                               env={"KERNELTUNE_TABLES": str(tmp_path / "tables")}))
    assert "a sweep never writes into the tables the runtime reads" in line and "kerneltune install" in line


def test_tables_that_cannot_be_written_lose_no_measurement(tmp_path):
    """The bucket is measured, then its table cannot be written: one line names the path and the journal
    that keeps the measurements; a rerun with a writable --out resumes from that journal."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "tables").write_text("")  # a file where the tables folder goes
    args = ("sweep", "ranker-attention", "--replay", RUN_C, "--bucket", "d128-tanh-long",
            "--space", FIXTURES / "ranker_attention/run-c-space.toml")
    line = one_line(kerneltune(*args, "--out", out))
    assert str(out / "tables") in line and "keeps every measurement" in line
    journal = out / "journals/ranker_attention-replay.jsonl"
    measured = [r for r in (json.loads(x) for x in journal.read_text().splitlines()) if r["status"] != "constraint"]
    assert measured
    r = kerneltune(*args, "--out", tmp_path / "elsewhere", "--journal", journal)
    assert r.returncode == 0, r.stdout + r.stderr
    again = [x for x in journal.read_text().splitlines() if json.loads(x)["status"] != "constraint"]
    assert len(again) == len(measured)  # nothing measured twice
    assert (tmp_path / "elsewhere/tables/nvidia-h200/ranker_attention.json").exists()


@pytest.mark.parametrize(("args", "says"), [
    (("verify", "ranker-attention", "--junitt", "x.xml"), "kerneltune verify: No such option: --junitt"),
    (("sweep",), "kerneltune sweep: Missing argument 'kernel'"),
    (("sweep", "ranker-attention", "--budget", "many"), "Invalid value for '--budget'"),
    (("--bogus", "report"), "kerneltune: No such option: --bogus"),
    (("nosuchcommand",), "No such command 'nosuchcommand'"),
])
def test_a_usage_error_is_bad_input_not_absent_hardware(args, says):
    """Click exits 2 on a usage error, the code for "target hardware absent", which CI recipes tolerate."""
    assert says in one_line(kerneltune(*args))


def test_the_readme_ci_recipe_fails_on_a_typo_in_an_option(tmp_path):
    """The README's recipe (``verify ... || test $? -eq 2``) passes where the GPU is absent; a typo must fail it."""
    import re

    readme = (REPO / "docs" / "ci.md").read_text()
    recipe = re.search(r"- run: (kerneltune verify .*\|\| test \$\? -eq 2)", readme)[1]
    typo = recipe.replace("--junit", "--junitt").replace("kerneltune", f"{sys.executable} -m kerneltune", 1)
    r = subprocess.run(["sh", "-c", typo], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode != 0 and "No such option: --junitt" in r.stderr


def test_what_a_sweep_writes_is_readable_by_the_team_whatever_the_umask(tmp_path):
    import stat

    out = tmp_path / "deep/out"
    r = kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--bucket", "d128-tanh-long", "--space",
                   FIXTURES / "ranker_attention/run-c-space.toml", "--out", out, "--strategy", "TPE", "--budget", "2",
                   umask=0o077)
    assert r.returncode == 0, r.stderr
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*")
             if not p.name.endswith(".lock")}
    assert modes["deep"] == modes["deep/out"] == modes["deep/out/journals"] == modes["deep/out/tables"] == 0o755
    assert modes["deep/out/journals/ranker_attention-replay.jsonl"] == 0o644
    assert modes["deep/out/tables/nvidia-h200/ranker_attention.json"] == 0o644


def test_the_replay_banner_comes_after_the_inputs_are_found_good(tmp_path):
    r = kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--bucket", "nope", "--out", tmp_path)
    assert "no bucket named 'nope'" in one_line(r) and "Replaying" not in r.stdout
    r = kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--gpus", "0,1", "--out", tmp_path)
    assert "--gpus: a replay answers from its journal" in one_line(r)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert f"--out {blocker}: {blocker} is a file, not a folder" in one_line(
        kerneltune("sweep", "ranker-attention", "--replay", RUN_C, "--out", blocker))


def test_a_replay_on_another_space_says_so_and_where_that_space_is(tmp_path):
    """A journal recorded on another space answers "unsupported" for the configs it lacks: the summary says why."""
    run_p = FIXTURES / "ranker_attention/run-p"
    r = kerneltune("sweep", "ranker-attention", "--replay", run_p / "journals", "--bucket",
                   "d128-tanh-long", "--out", tmp_path)
    out = " ".join(r.stdout.split())  # lines wrapped at 120 columns
    assert "candidates of search_spaces/ranker_attention.toml are not in the replayed journal: it was recorded on " \
           "another space" in out
    assert "Replay it with --space tests/fixtures/ranker_attention/run-p/space.toml" in out
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("damage", "says"), [
    ("problem", "no 'problem' (the shape it was measured at)"),
    ("kernel", "a table of kernel 'drafter_wide', not of 'ranker_attention'"),
])
def test_verify_refuses_a_table_it_cannot_measure_in_one_line(tmp_path, damage, says):
    table = json.loads((REPO / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json").read_text())
    if damage == "problem":
        next(iter(table["entries"].values())).pop("problem")
    else:
        table["kernel"] = "drafter_wide"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table))
    assert says in one_line(kerneltune("verify", "ranker-attention", "--table", path))
