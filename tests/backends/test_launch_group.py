"""The launch group: N rank processes, a rendezvous, symmetric peer buffers with tagged flags, deadlines
and per-rank event timing. Emulated on CPUs everywhere; on 2+ NVIDIA GPUs (``gpu``) with the Triton
stand-in kernel, through the same code."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from kerneltune.backends.launch_group import GroupError, LaunchGroup
from kerneltune.kernels.peer_exchange.exchange import payload
from kerneltune.kernels.peer_exchange.plugin import PLUGIN, ExchangeProblem

from ..paths import REPO

PROGRAM = "kerneltune.kernels.peer_exchange.rank_program:PeerExchangeRank"


def _two_gpus() -> str | None:
    try:
        import torch
    except ImportError:
        return "needs torch"
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2 or torch.version.hip:
        return "needs 2 NVIDIA GPUs"
    return None


DEVICES = [pytest.param("emulated", id="emulated"),
           pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                                  pytest.mark.skipif(bool(_two_gpus()), reason=_two_gpus() or "")])]


@pytest.mark.parametrize("device", DEVICES)
def test_each_rank_receives_its_peers_tagged_words_every_step(device):
    words = 5000  # not a multiple of the chunk: the last chunk is partial
    group = LaunchGroup(PROGRAM, {"words": words, "block": 1024, "num_warps": 4}, 2, device, timeout=120)
    try:
        for _ in range(2):  # two checked steps: the second is tagged anew and uses the other half
            outs = group.check()
            for o in outs:
                assert o["health"] == 0
                np.testing.assert_array_equal(o["out"], payload((o["rank"] - 1) % 2, o["step"], words))
        times = group.take(5)
        assert len(times) == 5 and all(t > 0 for t in times)
        outs = group.check()  # the timed steps left the flags and halves consistent
        assert all(o["step"] == 8 and o["health"] == 0 for o in outs)
    finally:
        group.close()


@pytest.mark.parametrize("device", DEVICES)
def test_a_missing_flag_is_a_missed_deadline_in_the_health_word_not_a_hang(device):
    params = {"words": 3000, "block": 1024, "num_warps": 4, "raise_flags": False, "deadline_s": 0.2,
              "max_spins": 200_000}
    group = LaunchGroup(PROGRAM, params, 2, device, timeout=120)
    try:
        outs = group.check()
    finally:
        group.close()
    assert all(o["health"] > 0 for o in outs)  # 1 + a chunk whose flag never came


def test_a_rank_that_never_answers_ends_the_group_in_time():
    """A wait with no deadline (a deadline longer than the group's timeout) is cut by the parent."""
    params = {"words": 100, "block": 64, "num_warps": 4, "raise_flags": False, "deadline_s": 3600}
    group = LaunchGroup(PROGRAM, params, 2, "emulated", timeout=3)
    with pytest.raises(GroupError, match=r"rank\(s\) \[0, 1\] gave no answer within 3 s"):
        group.check()
    assert not group.procs


def test_a_rank_that_fails_to_build_names_itself():
    with pytest.raises(GroupError, match=r"rank \d: TypeError"):
        LaunchGroup(PROGRAM, {"words": 10}, 2, "emulated", timeout=60)


def test_the_plugin_checks_the_exchange_and_reports_a_corrupt_word(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_GROUP_DEVICE", "emulated")
    problem = ExchangeProblem(ranks=3, words=2048)
    built = PLUGIN.build(problem, {"block": 512, "num_warps": 4})
    try:
        assert PLUGIN.check(built, problem, None).error is None

        class Corrupt:
            def check(self):
                outs = built.check()
                outs[2]["out"][7] ^= 1
                return outs

        error = PLUGIN.check(Corrupt(), problem, None).error
        assert error.startswith("rank 2: 1 of 2048 words wrong") and "first at 7" in error
    finally:
        PLUGIN.release(built)


class SleepyRank:
    """A rank program with no kernel: rank r's step takes (r + 1) x ``ms``; ``fail_rank`` raises in its step."""

    def __init__(self, ms: float, fail_rank: int = -1):
        self.ms, self.fail_rank = ms, fail_rank

    def setup(self, ctx):
        self.rank = ctx.rank

    def load(self, ctx, spec):
        pass

    def poison(self, ctx):
        pass

    def launch(self, ctx):
        if self.rank == self.fail_rank:
            raise RuntimeError("an illegal memory access on this rank")
        time.sleep((self.rank + 1) * self.ms / 1e3)

    def output(self, ctx):
        return {"rank": self.rank, "env": os.environ.get("KERNELTUNE_TEST_GROUP_ENV"), "pid": os.getpid(),
                "nvls": os.environ.get("NCCL_NVLS_ENABLE")}


SLEEPY = "tests.backends.test_launch_group:SleepyRank"


def test_each_group_runs_in_the_environment_it_was_made_in(monkeypatch):
    """Ranks are forked from a server started once, with the environment of then: each group's ranks still see
    the environment of the group's making, as spawned processes would."""
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    seen = []
    for value in ("first", "second"):
        monkeypatch.setenv("KERNELTUNE_TEST_GROUP_ENV", value)
        group = LaunchGroup(SLEEPY, {"ms": 1.0}, 2, "emulated", timeout=60)
        try:
            seen.append([(out["env"], out["nvls"]) for out in group.check()])
        finally:
            group.close()
    assert seen == [[("first", "0")] * 2, [("second", "0")] * 2]  # no NVLink multicast in the ranks
    assert "NCCL_NVLS_ENABLE" not in os.environ  # and this process's environment as it was


def test_the_ranks_of_a_process_killed_by_sigkill_end_with_it():
    code = ("from kerneltune.backends.launch_group import LaunchGroup; import time\n"
            f"g = LaunchGroup({SLEEPY!r}, {{'ms': 1.0}}, 2, 'emulated', timeout=60)\n"
            "print(*[o['pid'] for o in g.check()], flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        ranks = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(ranks) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    end = time.monotonic() + 30
    while any(alive(pid) for pid in ranks) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [pid for pid in ranks if alive(pid)], "a rank outlived the process that made its group"


def test_a_step_lasts_as_long_as_its_slowest_rank():
    group = LaunchGroup(SLEEPY, {"ms": 5.0}, 3, "emulated", timeout=60)
    try:
        times = group.take(4)
    finally:
        group.close()
    assert len(times) == 4 and min(times) >= 14.5  # rank 2's 15 ms, not rank 0's 5


def test_a_rank_that_fails_its_step_names_itself_and_ends_the_group():
    group = LaunchGroup(SLEEPY, {"ms": 1.0, "fail_rank": 1}, 2, "emulated", timeout=60)
    with pytest.raises(GroupError, match=r"launch group check: rank 1: RuntimeError: an illegal memory access"):
        group.check()
    assert not group.procs


def test_every_rank_meets_the_others_before_its_timed_steps(tmp_path, monkeypatch):
    """A rank that starts timing before a late peer has arrived times its own wait for that peer."""
    from kerneltune.backends.launch_group import RankContext

    ctx = RankContext(0, 2, "emulated", tmp_path, "t")
    calls: list[str] = []
    monkeypatch.setattr(ctx, "barrier", lambda: calls.append("barrier"))
    times = ctx.time_steps(lambda: calls.append("launch"), 3)
    assert len(times) == 3
    assert calls[0] == "barrier" and calls.count("barrier") == 1
