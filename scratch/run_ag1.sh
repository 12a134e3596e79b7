#!/usr/bin/env bash
# Run AG, call 1 (diagnostic; no kernel change): the special-function ops' throughput on this GPU, then Nsight
# Compute (full set) on the shipped kernel at four bench rows: D=64 even tanh / none, D=64 ragged tanh, D=128
# GQA 4:1 T=2k none.   Usage: bash scratch/run_ag1.sh OUTDIR
set -u
FINAL=$1
OUT=/tmp/ag1
rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import jax, jaxlib, triton, torch; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'triton', triton.__version__, 'torch', torch.__version__)" > "$OUT/versions.txt" 2>&1
t=$(date +%s)
timeout 150 python3 scratch/mufu_bench.py "$OUT/mufu.json" > "$OUT/mufu-console.txt" 2>&1
echo "mufu rc=$? $(( $(date +%s) - t )) s" >> "$OUT/mufu-console.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$NCU" --version > "$OUT/ncu-version.txt" 2>&1
mkdir -p "$OUT/ncu"
for pair in "d64-b64-t1k tanh" "d64-b64-t1k none" "d64-b64-t1k-ragged tanh" "d128-b16-t2k-gqa none"; do
  set -- $pair; name=$1-$2; t=$(date +%s)
  timeout 110 "$NCU" --kernel-name regex:"entry_mosaic_gpu" --launch-skip 1 --launch-count 1 --set full \
      -o "$OUT/ncu/$name" python3 scratch/profile_shape.py "$1" "$2" > "$OUT/ncu/$name-console.txt" 2>&1
  echo "ncu $name rc=$? $(( $(date +%s) - t )) s" | tee -a "$OUT/ncu/$name-console.txt"
  if [ -f "$OUT/ncu/$name.ncu-rep" ]; then
    "$NCU" -i "$OUT/ncu/$name.ncu-rep" --page details > "$OUT/ncu/$name.txt" 2>&1
    "$NCU" -i "$OUT/ncu/$name.ncu-rep" --page raw --csv 2>&1 | gzip > "$OUT/ncu/$name-raw.csv.gz"
    "$NCU" -i "$OUT/ncu/$name.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$OUT/ncu/$name-sass.csv.gz"
  fi
done
tail -n 14 "$OUT/mufu-console.txt"
grep -h -E "^  entry|Duration|Issue Slots Busy|SM Busy|Compute \(SM\) Throughput|highest-utilized|No Eligible|Eligible Warps" "$OUT"/ncu/*.txt | cut -c1-150
cp scratch/*.py scratch/run_ag1.sh "$OUT/"
tar czf "$FINAL/ag1.tgz" --exclude='*.ncu-rep' -C /tmp ag1
(cd /tmp && tar czf /tmp/ag1-reps.tgz ag1/ncu/*.ncu-rep) && [ "$(stat -c %s /tmp/ag1-reps.tgz)" -lt 100000000 ] && split -b 15M -d -a 1 /tmp/ag1-reps.tgz "$FINAL/ag1-reps.tgz.part"
ls -la "$FINAL"
