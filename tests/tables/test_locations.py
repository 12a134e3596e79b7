"""Where the runtime finds tables: shipped as package data, overlaid by the user's entry by entry; and a
built wheel, installed into a fresh venv outside the checkout, finds a shipped entry."""

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from kerneltune.files import logs
from kerneltune.tables import locations, lookup
from kerneltune.tables.lookup import read_overlaid, tuned_config
from kerneltune.tables.store import table_path

from ..paths import REPO
from .test_tables import BUCKET, HARD, RUNNING, entry, write


def test_the_shipped_tables_are_package_data():
    shipped = locations.shipped_tables_dir()
    assert shipped == REPO / "kerneltune/tables/shipped"
    assert (shipped / "nvidia-h200/ranker_attention.json").is_file()


def test_results_links_to_the_shipped_tables():
    """The product's record shows the shipped tables where they always were (not in mutmut's copy)."""
    assert (REPO / "results/tables").resolve() == locations.shipped_tables_dir().resolve()


def test_the_user_folder_is_the_environment_variable_else_platformdirs(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path))
    assert locations.user_tables_dir() == tmp_path
    monkeypatch.delenv("KERNELTUNE_TABLES")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert locations.user_tables_dir() == tmp_path / "xdg/kerneltune/tables"
    assert locations.table_roots() == (tmp_path / "xdg/kerneltune/tables", locations.shipped_tables_dir())


def test_user_entries_overlay_shipped_ones_entry_by_entry(tmp_path):
    logs._said.clear()
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    other = {**BUCKET, "cap_method": "none"}
    write(table_path(shipped, "nvidia-h200", "k"), entry(config={"block_q": 1}),
          entry(bucket=other, config={"block_q": 2}))
    write(table_path(user, "nvidia-h200", "k"), entry(config={"block_q": 3}))
    roots = (user, shipped)
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, roots) == {"block_q": 3}  # the user's wins
    assert tuned_config("k", other, "h1", HARD, RUNNING, roots) == {"block_q": 2}  # the shipped one still serves
    table, where = read_overlaid("k", "nvidia-h200", roots)
    assert len(table["entries"]) == 2 and where.index(str(user)) < where.index(" over ") < where.index(str(shipped))


def test_an_unusable_user_table_is_named_and_the_shipped_one_still_serves(tmp_path, caplog):
    logs._said.clear()
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    write(table_path(shipped, "nvidia-h200", "k"), entry(config={"block_q": 1}))
    bad = table_path(user, "nvidia-h200", "k")
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (user, shipped)) == {"block_q": 1}
    assert f"{bad}: not valid JSON" in caplog.text


def test_a_rewrite_never_drops_an_entry_that_breaks_the_schema_unseen(tmp_path):
    path = table_path(tmp_path, "nvidia-h200", "k")
    write(path, entry())
    data = json.loads(path.read_text())
    data["entries"]["broken"] = {"bucket": BUCKET, "config": {"block_q": None}}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"not rewritten.*entry broken.*block_q"):
        write(path, entry(bucket={**BUCKET, "seq_len": 512}))
    assert "broken" in json.loads(path.read_text())["entries"]


@pytest.mark.slow
def test_a_wheel_installed_outside_the_checkout_finds_a_shipped_entry(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels,
                    REPO], check=True, cwd=tmp_path, capture_output=True)
    [wheel] = wheels.glob("kerneltune-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
    py = venv / "bin/python"
    # Without PYTHONPATH: a checkout on it (its egg-info, which the wheel's build leaves) is "already installed".
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], check=True,
                   capture_output=True, env=bare)
    # What the lookup imports besides the standard library, copied in (the venv has no network).
    site = next((venv / "lib").glob("python3*/site-packages"))
    import filelock
    import platformdirs

    for mod in (filelock, platformdirs):
        shutil.copytree(mod.__path__[0], site / mod.__name__)
    shipped = json.loads((REPO / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json").read_text())
    e = next(iter(shipped["entries"].values()))
    running = {**e["stamps"], "device_kind": "nvidia-h200",
               "matched": ["gpu", "sm_count", "driver", "cuda", "jax", "jaxlib"]}
    probe = (
        "import json, sys, kerneltune\n"
        "from kerneltune.tables.lookup import tuned_config\n"
        "from kerneltune.tables.locations import shipped_tables_dir\n"
        "a = json.loads(sys.argv[1])\n"
        "print(json.dumps({'package': kerneltune.__file__, 'shipped': str(shipped_tables_dir()),\n"
        "  'config': tuned_config('ranker_attention', a['bucket'], a['hash'], ('head_dim', 'dtype'), a['running'])}))\n"
    )
    arg = json.dumps({"bucket": e["bucket"], "hash": e["stamps"]["kernel_hash"], "running": running})
    out = subprocess.run([py, "-I", "-c", probe, arg], check=True, capture_output=True, text=True, cwd=tmp_path,
                         env={"KERNELTUNE_TABLES": str(tmp_path / "user"), "PATH": "/usr/bin:/bin"})
    got = json.loads(out.stdout)
    assert got["package"].startswith(str(site)) and got["shipped"].startswith(str(site))
    assert got["config"] == e["config"]


@pytest.mark.parametrize("damage", ["binary", "deep", "folder", "unreadable"])
def test_any_unusable_user_table_is_named_once_and_skipped(tmp_path, caplog, damage):
    """The launch path's lookup never raises on a table it cannot use: binary, nested past the recursion limit,
    a folder in the file's place, a file it may not read; each is logged naming the file and skipped."""
    logs._said.clear()
    lookup._read_at.cache_clear()
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    write(table_path(shipped, "nvidia-h200", "k"), entry(config={"block_q": 1}))
    bad = table_path(user, "nvidia-h200", "k")
    bad.parent.mkdir(parents=True)
    if damage == "binary":
        bad.write_bytes(b"\xff\xfe\x00binary")
    elif damage == "deep":
        bad.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "folder":
        bad.mkdir()
    else:
        bad.write_text(json.dumps(entry(config={"block_q": 9})))
        bad.chmod(0)
        if os.access(bad, os.R_OK):  # root reads anything: make it unreadable another way
            bad.unlink()
            bad.symlink_to(bad)  # a link to itself: reading it fails with "too many levels of symbolic links"
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (user, shipped)) == {"block_q": 1}
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (user, shipped)) == {"block_q": 1}
    named = [r for r in caplog.records if str(bad) in r.getMessage()]
    assert len(named) == 1, caplog.text
