# The two set-up-and-go commands of the README.
.PHONY: demo test lint

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

lint:
	@.venv/bin/ruff check kerneltune tests
