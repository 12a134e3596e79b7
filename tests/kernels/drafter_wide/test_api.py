"""The drafter's run-time API on a CPU: the layout from the table as the ranker's lookup gives it
(stamps, nearest bucket, heuristic, each miss logged once), and one clear error without 4 AMD GPUs."""

import logging

import pytest

from kerneltune.backends.rocm_torch import MATCHED
from kerneltune.files import logs
from kerneltune.kernels.drafter_wide.api import KERNEL_NAME, DrafterWide, choose_layout
from kerneltune.kernels.drafter_wide.plugin import PLUGIN, DrafterProblem
from kerneltune.kernels.drafter_wide.rocm_runner import NeedsRocmGpus
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import table_path, update_table

RUNNING = {"backend": "rocm-torch", "matched": list(MATCHED), "device_kind": "amd-instinct-mi300x",
           "gpu": "AMD Instinct MI300X", "arch": "gfx942", "cu_count": 304, "gpu_count": 4, "rocm": "6.4",
           "torch": "2.9.0", "flydsl": "0.5.0"}
PROBLEM = DrafterProblem(arch="gfx942", requests=4, qpr=4, context=8192)
TUNED = {"ng": 192, "threads": 256, "w_na": 64}  # feasible, and not the heuristic


@pytest.fixture
def tables(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path))
    logs._said.clear()

    def write(problem=PROBLEM, config=TUNED, **stamps):
        entry = {"bucket": PLUGIN.bucket(problem), "config": config, "median_us": 50.0,
                 "stamps": {**{k: RUNNING[k] for k in MATCHED if k != "kernel_hash"},
                            "kernel_hash": PLUGIN.source_hash(), **stamps}}
        update_table(table_path(tmp_path, RUNNING["device_kind"], KERNEL_NAME), KERNEL_NAME,
                     RUNNING["device_kind"], lambda t: t["entries"].update({bucket_key(entry["bucket"]): entry}))
    return write


def test_the_tuned_layout_of_the_bucket(tables):
    assert PLUGIN.heuristic(PROBLEM) != TUNED
    tables()
    assert choose_layout(PROBLEM, RUNNING) == TUNED


def test_an_untuned_context_takes_the_nearest_bucket_and_says_so(tables, caplog):
    tables()
    with caplog.at_level(logging.WARNING, "kerneltune.tables"):
        assert choose_layout(DrafterProblem(arch="gfx942", requests=4, qpr=4, context=16384), RUNNING) == TUNED
        choose_layout(DrafterProblem(arch="gfx942", requests=4, qpr=4, context=16384), RUNNING)
    assert sum("not tuned; using nearest" in r.message for r in caplog.records) == 1  # once per process


@pytest.mark.parametrize(("stamp", "value"), [("gpu_count", 8), ("arch", "gfx950"), ("rocm", "6.2"),
                                              ("kernel_hash", "0123456789abcdef")])
def test_an_entry_stamped_for_another_system_gives_the_heuristic_with_a_logged_miss(tables, caplog, stamp, value):
    tables(**{stamp: value})
    with caplog.at_level(logging.WARNING, "kerneltune.tables"):
        assert choose_layout(PROBLEM, RUNNING) == PLUGIN.heuristic(PROBLEM)
    assert any(stamp in r.message and "not used" in r.message for r in caplog.records)


def test_a_tuned_layout_this_problem_cannot_use_is_refused_with_the_reason(tables, caplog):
    tables(config={"ng": 128, "threads": 512, "w_na": 64})  # QKV's 2304 rows over 128 blocks: 18 > 16 per tile
    with caplog.at_level(logging.WARNING, "kerneltune.tables"):
        assert choose_layout(PROBLEM, RUNNING) == PLUGIN.heuristic(PROBLEM)
    assert any("QKV_R" in r.message for r in caplog.records)


def test_without_4_amd_gpus_construction_names_the_hardware():
    with pytest.raises(NeedsRocmGpus, match=r"4 AMD MI300X \(gfx942\) or MI355X \(gfx950\) GPUs"):
        DrafterWide(PROBLEM, rank=0)
