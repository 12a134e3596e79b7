#!/usr/bin/env bash
# The packages the H200 machine's image lacks (or holds at other versions), as wheels in .whl/ for `make gpu-record`
# to install there with no network: `make gpu-wheels` on any machine with pip and network, then carry .whl along.
# The versions are this project's venv's (what CI tests); the image's own jax, torch, triton, numpy, pandas, jinja2,
# pytest, pytest-xdist, pytest-timeout and hypothesis are used as they are.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
WHEELS=(optuna==5.1.0 SQLAlchemy==2.1.9 alembic==1.20.1 Mako==1.4.3 colorlog==6.12.0 platformdirs==4.14.9
        plotly==7.1.0 filelock==4.3.2 typer==0.29.3 click==8.5.1 shellingham==1.5.4 rich==15.0.0)
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl "${WHEELS[@]}"
echo "gpu-wheels: $(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/ (carry it: the device tool's carry=[\".whl\"])"
