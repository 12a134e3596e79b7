"""verify --interpret's memory: said before it starts, fewer workers where the machine holds fewer, one line and
exit 3 where it holds none; the machine's memory read from /proc and the control groups as a container sets it."""

from __future__ import annotations

import pytest

from kerneltune.kernels.drafter_wide import memory_plan as mp

GB = 10 ** 9


def _machine(tmp_path, total_kb: int, cgroup: str = "", limits: dict[str, str] | None = None):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text(
        f"MemTotal: {total_kb} kB\nMemFree: 1 kB\nMemAvailable: {total_kb // 2} kB\n")
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    for path, value in (limits or {}).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(value)
    return mp.machine_memory(tmp_path)


def test_ram_without_a_limit(tmp_path):
    m = _machine(tmp_path, 16_000_000, "0::/user.slice\n", {"sys/fs/cgroup/user.slice/memory.max": "max\n"})
    assert (m.limit, m.available, m.source) == (16_000_000 * 1024, 8_000_000 * 1024, "RAM")


def test_a_v1_limit_of_a_group_above_this_process_is_the_machines(tmp_path):
    m = _machine(tmp_path, 64_000_000, "4:memory:/ci/job\n1:cpu:/\n", {
        "sys/fs/cgroup/memory/ci/job/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/ci/memory.limit_in_bytes": str(7 * GB),
        "sys/fs/cgroup/memory/ci/memory.usage_in_bytes": str(2 * GB)})
    assert m.limit == 7 * GB and m.available == 5 * GB and "/ci" in m.source


def test_a_v2_limit(tmp_path):
    m = _machine(tmp_path, 64_000_000, "0::/runner\n", {"sys/fs/cgroup/runner/memory.max": str(16 * GB),
                                                         "sys/fs/cgroup/runner/memory.current": str(GB)})
    assert m.limit == 16 * GB and m.available == 15 * GB


def test_two_workers_where_they_fit_one_where_only_one_does_none_is_one_line():
    def machine(limit):
        return mp.MachineMemory(limit, limit, "RAM")
    assert mp.plan(2, machine(16 * GB)).workers == 2
    one = mp.plan(2, machine(mp.expected(1) + GB // 10))
    assert one.workers == 1 and one.expected == mp.expected(1)
    assert "1 worker process;" in one.line
    with pytest.raises(ValueError, match=r"needs about \d+\.\d GB .* this machine has 1\.0 GB") as e:
        mp.plan(2, machine(GB))
    assert "\n" not in str(e.value)


def test_verify_interpret_says_its_memory_first_and_refuses_a_machine_too_small(monkeypatch):
    from typer.testing import CliRunner

    from kerneltune.cli import app
    from kerneltune.kernels.drafter_wide.plugin import DrafterWidePlugin
    from kerneltune.seams.protocols import EmulationCheck

    ok = EmulationCheck("small model", "4x2 rows", 0.1, 4, 4, tolerance=1.0)
    monkeypatch.setattr(DrafterWidePlugin, "interpret", lambda self, n=None: [ok])
    monkeypatch.setattr(mp, "machine_memory", lambda: mp.MachineMemory(32 * GB, 30 * GB, "RAM"))
    r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith("verify drafter-wide --interpret expects ")
    monkeypatch.setattr(mp, "machine_memory", lambda: mp.MachineMemory(GB, GB, "the memory limit of control group /ci"))
    r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret"])
    assert r.exit_code == 3 and "control group /ci" in r.output, r.output
    assert len([line for line in r.output.splitlines() if line.strip()]) <= 2, r.output
