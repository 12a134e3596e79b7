"""An interpreter of FlyDSL's AMDGPU kernels on the CPU: the compiled program, lane by lane.

``program.capture`` takes the MLIR module FlyDSL builds for a kernel at the last stage where ``scf``
control flow is still structured (after ``convert-fly-to-rocdl``); ``program.Program`` turns it into
plain Python objects once; ``machine.Launch`` runs every block of a grid (or of several grids, one per
rank, over one global memory) as cooperative tasks over NumPy arrays of lanes, interleaved by a
``schedule.Schedule``; ``races`` checks the LDS accesses of a block's waves against its barriers and
``weak_memory`` the global ones against scoped releases and acquires. What it proves and what it cannot is in
the drafter's README.
"""
