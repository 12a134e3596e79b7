"""`kerneltune install`: a live sweep's table merged into the user's tables; a replay's never."""

import json
import subprocess
import sys

import pytest

from kerneltune.tables.install import install_table
from kerneltune.tables.store import TableError, read_table, table_path

from ..paths import REPO
from .test_tables import BUCKET, entry, write


def test_entries_overlay_the_installed_table_by_bucket(tmp_path):
    src, root = tmp_path / "out/tables", tmp_path / "user"
    write(table_path(root, "nvidia-h200", "k"), entry(config={"block_q": 1}),
          entry(bucket={**BUCKET, "seq_len": 512}, config={"block_q": 2}))
    write(table_path(src, "nvidia-h200", "k"), entry(config={"block_q": 3}))
    dest, n = install_table(table_path(src, "nvidia-h200", "k"), root)
    assert dest == table_path(root, "nvidia-h200", "k") and n == 1
    configs = sorted(e["config"]["block_q"] for e in read_table(dest)["entries"].values())
    assert configs == [2, 3]


@pytest.mark.parametrize(("make", "why"), [
    (lambda p: write(p, entry(replayed_from="/x/journal.jsonl")), "a replay wrote"),
    (lambda p: (p.parent.mkdir(parents=True), p.write_text("[]")), "schema"),
    (lambda p: None, "no such table"),
])
def test_a_replay_a_broken_or_a_missing_table_is_refused_by_name(tmp_path, make, why):
    src = table_path(tmp_path / "out/tables", "nvidia-h200", "k")
    make(src)
    with pytest.raises(TableError, match=why) as e:
        install_table(src, tmp_path / "user")
    assert str(src) in str(e.value) and not (tmp_path / "user").exists()


def test_the_cli_installs_into_the_user_folder(tmp_path):
    src = table_path(tmp_path / "out/tables", "nvidia-h200", "k")
    write(src, entry())
    user = tmp_path / "user"
    r = subprocess.run([sys.executable, "-m", "kerneltune", "install", str(src)], capture_output=True, text=True,
                       cwd=REPO, env={"KERNELTUNE_TABLES": str(user), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "installed 1 entries" in r.stdout and json.loads(table_path(user, "nvidia-h200", "k").read_text())
    replay = table_path(tmp_path / "replay/tables", "nvidia-h200", "k")
    write(replay, entry(replayed_from="/x/journal.jsonl"))
    r = subprocess.run([sys.executable, "-m", "kerneltune", "install", str(replay)], capture_output=True, text=True,
                       cwd=REPO, env={"KERNELTUNE_TABLES": str(user), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 3 and "a replay wrote" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("kernel", ["ranker_attention", "k"])
def test_installing_a_table_of_a_kernel_that_digests_its_programs_says_how_to_record_them(tmp_path, kernel):
    from typer.testing import CliRunner

    from kerneltune.cli import app
    from kerneltune.tables.lookup import bucket_key
    from kerneltune.tables.store import update_table

    src = table_path(tmp_path / "out/tables", "nvidia-h200", kernel)
    update_table(src, kernel, "nvidia-h200", lambda t: t["entries"].update({bucket_key(BUCKET): entry()}))
    r = CliRunner().invoke(app, ["install", str(src), "--to", str(tmp_path / "user")])
    assert r.exit_code == 0, r.output
    dest = table_path(tmp_path / "user", "nvidia-h200", kernel)
    hint = f"kerneltune rekey {kernel} --table {dest}"
    assert (hint in " ".join(r.output.split())) == (kernel == "ranker_attention"), r.output
