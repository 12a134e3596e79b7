#!/usr/bin/env bash
# Run C, step 4 (one H200): `kerneltune verify ranker-attention` on the table from step 1 (issue 5),
# then the bench test that step 3 failed (JAX attention_mgpu applies no softmax scale).
# Usage: bash results/ranker_attention/h200_verify_c4.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
timeout -s INT 95 python3 -m kerneltune verify ranker-attention > "$OUT/verify-console.txt" 2>&1
echo "verify rc=$?" >> "$OUT/verify-console.txt"
timeout -s INT 70 python3 -m pytest -m gpu -q -p no:cacheprovider tests/bench > "$OUT/pytest-bench.txt" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest-bench.txt"
cat "$OUT/verify-console.txt"; tail -n 4 "$OUT/pytest-bench.txt"
