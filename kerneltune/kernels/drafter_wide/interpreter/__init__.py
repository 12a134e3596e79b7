"""An interpreter of FlyDSL's AMDGPU kernels on the CPU: the compiled program, lane by lane.

``program.capture`` takes the MLIR module FlyDSL builds for a kernel at the last stage where ``scf``
control flow is still structured (after ``convert-fly-to-rocdl``); ``program.Program`` turns it into
plain Python objects once; ``machine.Launch`` runs every block of a grid (or of several grids, one per
rank, over one global memory) as cooperative tasks over NumPy arrays of lanes. What it proves and what
it cannot (memory ordering, timing) is in the drafter's README.
"""
