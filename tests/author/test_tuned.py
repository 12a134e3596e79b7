"""The run-time call: a kernel's tuned config for a problem on this device, never one the problem refuses."""

import json
import logging

import pytest

from kerneltune.seams.measure import MeasureSettings
from kerneltune.seams.registry import load_backend
from kerneltune.tables.install import install_table
from kerneltune.tables.lookup import tuned_config
from kerneltune.tuning.sweep import SweepOptions, WorkerOptions, run_sweep

from ..paths import REPO
from .numpy_kernels import KERNEL

FAST = MeasureSettings(max_seconds=0.1, min_samples=3, batch=3)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """RowScale swept on its two buckets by the engine (its own space: no space file), installed in a folder."""
    work = tmp_path_factory.mktemp("tuned")
    opts = SweepOptions(kernel=str(REPO / "tests/author/numpy_kernels.py:KERNEL"), space_path=None, out=work / "out",
                        workers=WorkerOptions(compile_workers=0, run_timeout=60), settings=FAST)
    results = run_sweep(opts)
    assert [r.bucket for r in results] == ["r8", "r64"] and all(r.entry for r in results)
    assert opts.journal_path.name == "row-scale-live.jsonl"  # named by the kernel, not its attribute
    install_table(work / "out/tables/cpu/row-scale.json", work / "tables")
    return work / "tables"


def lookup(roots, **fields):
    p = KERNEL.problem({"cols": 16, "dtype": "float32", **fields})
    return tuned_config(KERNEL.name, dict(KERNEL.bucket(p)), KERNEL.source_hash(), KERNEL.hard_bucket_fields,
                        load_backend(KERNEL.backend).stamps(), roots)


def test_a_tuned_bucket_gets_its_entry(installed, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TABLES", str(installed))
    table = json.loads((installed / "cpu/row-scale.json").read_text())
    entry = next(e for e in table["entries"].values() if e["bucket_name"] == "r64")
    assert KERNEL.tuned(rows=64, cols=16, dtype="float32") == entry["config"]


def test_the_nearest_entry_a_new_shape_refuses_is_never_returned(installed, monkeypatch, caplog):
    """r64's winner forced to block 8: rows=12 and rows=5 are nearest to it, and block 8 divides neither. Its
    fallbacks and runner-ups too: which configs a sweep keeps beside the winner depends on the machine's load (in a
    busy suite a measured config that divides 12 answered rows=12 before the heuristic could)."""
    monkeypatch.setenv("KERNELTUNE_TABLES", str(installed))
    path = installed / "cpu/row-scale.json"
    table = json.loads(path.read_text())
    for entry in table["entries"].values():
        entry["config"] = {"block": 8, "order": "backward"}
        for measured in (*entry.get("fallbacks", ()), *entry.get("runner_ups", ())):
            measured["config"] = {"block": 8, "order": "backward"}
    path.write_text(json.dumps(table))
    assert lookup((installed,), rows=40) == {"block": 8, "order": "backward"}  # the raw lookup would give it
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        for rows in (40, 12, 5, 3, 1):
            config = KERNEL.tuned(rows=rows, cols=16, dtype="float32")
            assert rows % config.block == 0, (rows, config)
    assert KERNEL.tuned(rows=40, cols=16, dtype="float32") == {"block": 8, "order": "backward"}
    assert KERNEL.tuned(rows=12, cols=16, dtype="float32") == {"block": 1, "order": "forward"}  # the heuristic
    miss = [m for m in caplog.messages if "rows=12" in m]
    assert len(miss) == 1 and "block 8 does not divide 12 rows" in miss[0] and miss[0].endswith(f"({path})")


def test_another_dtype_never_borrows_an_entry(installed, monkeypatch, caplog):
    monkeypatch.setenv("KERNELTUNE_TABLES", str(installed))
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        config = KERNEL.tuned(rows=64, cols=16, dtype="float64")
    assert config == KERNEL.heuristic(KERNEL.problem({"rows": 64, "cols": 16, "dtype": "float64"}))
    assert "no valid entry shares dtype with" in caplog.text
