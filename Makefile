# The two set-up-and-go commands of the README.
.PHONY: demo test test-matrix test-gpu gpu-record gpu-wheels lint

# Set up, then run the main job on its built-in default: the CLI's help and a sweep
# (a replay of the shipped H200 journal on machines without a Hopper GPU).
demo:
	@bash .ci/bootstrap.sh
	@.venv/bin/kerneltune --help
	@bash .ci/demo.sh

# Set up, then run the full test suite (GPU and ROCm tests skip with their reason).
test:
	@bash .ci/bootstrap.sh
	@.venv/bin/ruff check kerneltune tests
	@.venv/bin/python -m pytest -q -n 2 --dist loadgroup

# The drafter's whole shape matrix through the CPU interpreter (about 15 minutes on 2 cores): `make test` runs one
# shape of it a run, drawn from a seed it prints (KERNELTUNE_SHAPE_SEED=N runs that one again).
test-matrix:
	@bash .ci/bootstrap.sh
	@KERNELTUNE_SHAPE_MATRIX=1 .venv/bin/python -m pytest -q -n 2 --dist loadgroup \
		tests/kernels/drafter_wide/test_interpret_shapes.py

# The GPU tests on a Hopper machine, with a Python whose JAX runs on CUDA (PYTHON=...): four at a time (each
# is mostly a compile on the CPU), then the ones that judge measured times, alone on the GPU.
PYTHON ?= python3
test-gpu:
	@XLA_PYTHON_CLIENT_PREALLOCATE=false $(PYTHON) -m pytest -q -m "gpu and not timing" -n 4 --dist loadgroup
	@$(PYTHON) -m pytest -q -m "gpu and timing"

# The GPU record: on one H200, every GPU figure the guide quotes measured again into results/gpu-record/<date>/
# (summary.md beside the raw output). PART=1|2|3 runs one part, each within a ten-minute call; the packages the
# machine lacks come as wheels in .whl/, made by `make gpu-wheels` where pip reaches PyPI.
gpu-record:
	@$(PYTHON) .ci/gpu_record/record.py run $(if $(PART),--part $(PART))

gpu-wheels:
	@PYTHON=$(PYTHON) bash .ci/gpu_record/wheels.sh

lint:
	@.venv/bin/ruff check kerneltune tests
