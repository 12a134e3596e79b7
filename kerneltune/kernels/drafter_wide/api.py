"""The drafter's run-time launch API: one ``DrafterWide`` per rank of a TP4 process group, built once.

Its layout comes from the tuned table for the running GPU kind, arch and GPU count, through the same
lookup as ``ranker_attention``: entries stamped for another GPU, driver stack or kernel source are
passed over, an untuned bucket takes the nearest tuned one, and without a usable entry the heuristic
serves; each miss is logged once. The launch itself needs 4 AMD MI300X/MI355X GPUs and has never run
(no AMD GPU in this workplace); without them construction raises ``NeedsRocmGpus``, naming them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .kernel_args import KernelArgs
from .layout import DrafterLayout
from .plugin import PLUGIN, DrafterProblem
from .rocm_runner import NeedsRocmGpus, require_rocm_gpus

KERNEL_NAME = "drafter_wide"


def choose_layout(problem: DrafterProblem, running: Mapping[str, Any]) -> dict[str, int]:
    """The tuned layout for ``problem`` on the system ``running`` describes (a backend's stamps), or the
    heuristic's; a table layout this problem cannot use (rows, LDS) is refused like a foreign one."""
    from kerneltune.tables.lookup import tuned_config

    tiles = tuned_config(KERNEL_NAME, PLUGIN.bucket(problem), PLUGIN.source_hash(), PLUGIN.hard_bucket_fields,
                         dict(running), refuses=lambda item: PLUGIN.infeasibility(problem, item["config"]))
    return dict(tiles) if tiles is not None else PLUGIN.heuristic(problem)


class DrafterWide:
    """One rank's drafter step: the megakernel built once for the layout the table gives this system
    (or ``tiles``, as a sweep's candidate: refused with the reason if this problem cannot use them).

    ``__call__`` takes the step's device tensors (as ``rocm_runner.step_tensors`` lays them out), the
    rank's packed weights and the group's symmetric peer buffers, and launches once."""

    def __init__(self, problem: DrafterProblem, rank: int, tiles: Mapping[str, int] | None = None,
                 wait_ticks: int = 1_000_000_000):
        arch = require_rocm_gpus()  # NeedsRocmGpus, naming the hardware, before anything else
        if arch != problem.arch:
            raise NeedsRocmGpus(f"the problem is for {problem.arch}; this machine's GPUs are {arch}")
        from kerneltune.backends.rocm_torch import system_stamps

        from .kernel import build_wide

        self.problem, self.rank = problem, rank
        if tiles is not None and (why := PLUGIN.infeasibility(problem, tiles)) is not None:
            raise ValueError(f"tiles: {why}")
        self.tiles = dict(tiles) if tiles is not None else choose_layout(problem, system_stamps())
        self.layout = DrafterLayout(**self.tiles, qpr=problem.qpr)
        self._run = build_wide(self.layout, arch, 0, wait_ticks)
        self._peers: tuple[tuple[int, ...], Any] | None = None  # the group's 4 symmetric regions, on the device

    def __call__(self, tensors: Mapping[str, Any], weights: Mapping[str, tuple[Any, Any]], h_out: Any,
                 scratch: Any, sym_local: Any, sym_peers: list[int], step_word: Any, health: Any) -> None:
        import torch

        t, n = tensors, h_out.shape[0]
        self.layout.check_rows(n)
        if self._peers is None or self._peers[0] != tuple(sym_peers):  # the kernel reads them from device memory
            self._peers = (tuple(sym_peers), torch.tensor(sym_peers, dtype=torch.int64, device=h_out.device))
        packed = {f"{part}_{k}": x.data_ptr() for k in ("qkv", "o", "gu", "d")
                  for part, x in zip(("w", "s"), weights[k], strict=True)}
        args = KernelArgs(
            x_in=t["x_in"].data_ptr(), h_out=h_out.data_ptr(), tab=t["tab"].data_ptr(), **packed,
            fin_ln=t["fin_ln"].data_ptr(), cos_sin=t["cos_sin"].data_ptr(), block_table=t["block_table"].data_ptr(),
            positions=t["positions"].data_ptr(), slots=t["slots"].data_ptr(), scratch=scratch.data_ptr(),
            sym=sym_local.data_ptr(), peers=self._peers[1].data_ptr(), step=step_word.data_ptr(),
            health=health.data_ptr(), rank=self.rank, bt_width=t["block_table"].shape[1], n_rows=n)
        self._run(*args.ordered())
