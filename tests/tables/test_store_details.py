"""The table store and install, detail by detail (found by the mutation run of run K's session): where the
temporary file lives, the file's format, the lock, every schema message, every refusal of install."""

import fnmatch
import json
import os
import threading
import time

import pytest
from filelock import FileLock

from kerneltune.tables import store
from kerneltune.tables.install import install_table
from kerneltune.tables.stamps import matched_keys, mismatches
from kerneltune.tables.store import TableError, read_table, table_path, update_table

from .test_tables import entry, write


def test_the_temporary_file_sits_beside_the_table_under_the_name_the_cleanup_looks_for(tmp_path, monkeypatch):
    path = table_path(tmp_path, "nvidia-h200", "k")
    moved = []
    real = os.replace
    monkeypatch.setattr(store.os, "replace", lambda a, b: (moved.append(a), real(a, b)))
    write(path, entry())
    [tmp] = moved
    assert os.path.dirname(tmp) == str(path.parent) and fnmatch.fnmatch(os.path.basename(tmp), f".{path.name}.*.tmp")


def test_the_file_is_sorted_one_space_json_without_the_readers_notes(tmp_path):
    path = table_path(tmp_path, "nvidia-h200", "k")
    write(path, entry())
    write(path, entry(config={"block_q": 128}))  # a rewrite: the table read back carries the reader's notes
    text = path.read_text()
    data = json.loads(text)
    assert "skipped" not in data and text == json.dumps(data, indent=1, sort_keys=True) + "\n"


def test_a_writer_waits_for_the_lock_another_holds(tmp_path):
    path = table_path(tmp_path, "nvidia-h200", "k")
    path.parent.mkdir(parents=True)
    done = threading.Event()
    with FileLock(str(path) + ".lock"):
        threading.Thread(target=lambda: (write(path, entry()), done.set()), daemon=True).start()
        time.sleep(0.3)
        assert not done.is_set() and not path.exists()
    assert done.wait(10) and read_table(path)["entries"]


def skipped_for(tmp_path, bad):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": 1, "kernel": "k", "device_kind": "d", "entries": {"e": bad}}))
    [why] = read_table(path)["skipped"]
    return why.removeprefix(f"{path}: entry e: ").removesuffix("; entry skipped")


@pytest.mark.parametrize(("change", "why"), [
    (lambda e: "x", "not an object"),
    (lambda e: {**e, "spread": "x"}, "spread: 'x' is not a finite number at or above 0"),
    (lambda e: {**e, "stamps": []}, "field 'stamps' is not an object"),
    (lambda e: {**e, "fallbacks": {}}, "field 'fallbacks' is not a list"),
    (lambda e: {**e, "runner_ups": [3]}, "runner_ups[0] is not an object"),
    (lambda e: {**e, "fallbacks": [{"config": {}, "median_us": 1.0}]},
     "field 'fallbacks[0].config' is missing, empty or not an object"),
    (lambda e: {**e, "fallbacks": [{"config": {"a": [1]}, "median_us": 1.0}]},
     "fallbacks[0].config.a: [1] is not a string, number or bool"),
    (lambda e: {**e, "runner_ups": [{"config": {"a": 1}, "median_us": True}]},
     "runner_ups[0].median_us: True is not a positive finite time"),
])
def test_every_schema_message_names_the_field(tmp_path, change, why):
    assert skipped_for(tmp_path, change(entry())) == why


def test_measured_fallbacks_runner_ups_and_a_spread_read_clean(tmp_path):
    measured = [{"config": {"block_q": 64, "persistent": True}, "median_us": 10.5}]
    good = {**entry(), "spread": 0.01, "fallbacks": measured, "runner_ups": measured}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": 1, "entries": {"e": good}}))
    table = read_table(path)
    assert table["skipped"] == [] and table["entries"]["e"] == good


@pytest.mark.parametrize(("data", "why"), [
    ({"schema": 2, "entries": {}}, "schema is 2, this kerneltune reads 1"),
    ([], "schema is None, this kerneltune reads 1"),
    ({"schema": 1}, "field 'entries' is missing or not an object"),
])
def test_an_unusable_table_file_is_named_with_its_fault(tmp_path, data, why):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TableError) as e:
        read_table(path)
    assert str(e.value) == f"{path}: {why}"


def test_a_rewrite_refusal_lists_every_broken_entry(tmp_path):
    path = table_path(tmp_path, "d", "k")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": 1, "entries": {"a": "x", "b": {**entry(), "spread": "y"}}}))
    with pytest.raises(TableError) as e:
        update_table(path, "k", "d", lambda t: None)
    assert f"{path}: entry a: not an object; entry skipped; {path}: entry b: spread" in str(e.value)


def test_a_fresh_install_names_its_kernel_and_device(tmp_path):
    src = table_path(tmp_path / "out", "nvidia-h200", "k")
    write(src, entry())
    dest, _ = install_table(src, tmp_path / "user")
    data = json.loads(dest.read_text())
    assert (data["kernel"], data["device_kind"]) == ("k", "nvidia-h200")


def test_an_entry_without_stamps_installs(tmp_path):
    src = table_path(tmp_path / "out", "d", "k")
    bare = {k: v for k, v in entry().items() if k != "stamps"}
    update_table(src, "k", "d", lambda t: t["entries"].update({"e": bare}))
    assert install_table(src, tmp_path / "user")[1] == 1


@pytest.mark.parametrize(("table", "why"), [
    ({"kernel": "", "device_kind": "d"}, "fields 'kernel' and 'device_kind' must name"),
    ({"kernel": "k", "device_kind": ""}, "fields 'kernel' and 'device_kind' must name"),
    ({"kernel": "k"}, "fields 'kernel' and 'device_kind' must name"),
    ({"kernel": 3, "device_kind": "d"}, "fields 'kernel' and 'device_kind' must name"),
    ({"kernel": "k", "device_kind": "d", "entries": {}}, "no entries to install"),
    ({"kernel": "k", "device_kind": "d", "entries": {"a": "x", "b": "y"}},
     "not installed, {p}: entry a: not an object; entry skipped; {p}: entry b: not an object"),
    ({"kernel": "k", "device_kind": "d", "entries": {
        "a": entry(replayed_from="/j1"), "b": entry(replayed_from="/j2")}},
     "not installed: a replay wrote a, b; install a live sweep's table"),
])
def test_install_refuses_by_name(tmp_path, table, why):
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schema": 1, "entries": {"e": entry()}, **table}))
    with pytest.raises(TableError) as e:
        install_table(src, tmp_path / "user")
    assert str(e.value).startswith(f"{src}: ") and why.format(p=src) in str(e.value)


def test_a_table_is_not_installed_over_itself(tmp_path):
    src = table_path(tmp_path, "nvidia-h200", "k")
    write(src, entry())
    with pytest.raises(TableError, match="already the installed table"):
        install_table(src, tmp_path)


def test_the_kernel_hash_is_matched_once_and_a_mismatch_shows_both_values():
    assert matched_keys({"matched": ["gpu", "kernel_hash"]}) == ("gpu", "kernel_hash")
    assert matched_keys({"matched": ["gpu"]}) == ("gpu", "kernel_hash")
    assert mismatches({"gpu": "A", "kernel_hash": "h"}, {"matched": ["gpu"], "gpu": "B", "kernel_hash": "h"}) == [
        "gpu: table 'A', running 'B'"]


def test_a_full_disk_names_the_table_not_its_temporary_file(tmp_path, monkeypatch):
    import errno
    import os

    from kerneltune.tables.store import update_table

    path = tmp_path / "nvidia-h200/ranker_attention.json"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device") as e:
        update_table(path, "ranker_attention", "nvidia-h200", lambda t: None)
    assert e.value.filename == str(path) and not list(path.parent.glob(".*.tmp"))
