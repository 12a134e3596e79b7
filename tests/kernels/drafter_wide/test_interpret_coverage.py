"""The branch and loop-trip coverage of the interpreter (``interpret_coverage.py``) on a kernel of three sites
placed in the role modules: a launch that takes a branch one way, or runs a loop once, leaves the site uncovered;
one that takes it both ways and runs three trips covers it. The shape matrix's figures rest on this."""

from __future__ import annotations

import numpy as np

from kerneltune.kernels.drafter_wide.interpret_coverage import Coverage
from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
from kerneltune.kernels.drafter_wide.interpreter.program import Program

# out[lane] = (lane < n) ? 1 + m : 0: an scf.if and an arith.select on ``lane < n``, an scf.for of ``m`` trips.
TEXT = '''module attributes {gpu.container_module} {
 gpu.module @m {
  gpu.func @k(%out: i64, %n: i32, %m: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
   %t = gpu.thread_id x
   %ti = arith.index_cast %t : index to i32
   %c0 = arith.constant 0 : i32
   %c1 = arith.constant 1 : i32
   %inb = arith.cmpi slt, %ti, %n : i32
   %v = scf.if %inb -> (i32) {
     scf.yield %c1 : i32
   } else {
     scf.yield %c0 : i32
   } loc("attention_role.py":10:5)
   %s = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %v) -> (i32) : i32 {
     %a2 = arith.addi %acc, %c1 : i32
     scf.yield %a2 : i32
   } loc("gemv_role.py":20:5)
   %w = arith.select %inb, %s, %c0 : i32 loc("merge_role.py":30:5)
   %e = arith.extsi %ti : i32 to i64
   %c4 = arith.constant 4 : i64
   %o = arith.muli %e, %c4 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %w, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
   gpu.return
  }
 }
}
'''


def _launch(cov: Coverage, program: Program, n: int, m: int) -> np.ndarray:
    mem = GlobalMemory()
    out = np.zeros(64, np.int32)
    Launch(program, mem, "gfx942").run([Grid([mem.allocate("out", out), n, m], 1)])
    return out


def test_one_way_and_one_trip_are_reported_uncovered_then_both_ways_and_three_trips_covered():
    cov = Coverage()
    program = cov.instrument(Program(TEXT))
    np.testing.assert_array_equal(_launch(cov, program, 64, 1), 2)
    sites = {(s.file, s.kind): s for s in cov.sites.values()}
    assert set(sites) == {("attention_role.py", "if"), ("gemv_role.py", "for"), ("merge_role.py", "select")}
    assert sites["attention_role.py", "if"].taken and not sites["attention_role.py", "if"].both_ways
    assert not sites["merge_role.py", "select"].both_ways
    assert dict(sites["gemv_role.py", "for"].trips) == {1: 1} and not sites["gemv_role.py", "for"].first_middle_last
    assert cov.summary()["if both ways"] == (0, 1)

    out = _launch(cov, program, 32, 3)
    np.testing.assert_array_equal(out, [4] * 32 + [0] * 32)
    assert all(s.both_ways for s in cov.sites.values() if s.kind != "for")
    assert sites["gemv_role.py", "for"].first_middle_last
    summary = cov.summary()
    assert summary["if both ways"] == summary["select both ways"] == (1, 1)
    assert summary["for loops at first, middle and last trip"] == (1, 1)
    assert summary["lines run"] == (3, 3)
