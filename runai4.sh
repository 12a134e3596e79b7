#!/usr/bin/env bash
# Run AI, call 4: scratch/probe_lazy.py (PTX dumped per compile, the three variants timed in rounds), then each PTX
# assembled by the device's CUDA 13.0 ptxas for sm_90a (-O3 -v) and disassembled by its nvdisasm; opcode histograms
# and their differences from the off kernel. Usage: bash runai4.sh OUTDIR
set -u
OUT=$1; D=/tmp/lazy-dump; B=/usr/local/cuda-13.0/bin
mkdir -p "$D" "$OUT/sass"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu-call4.csv"
MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO="$D" OUT="$OUT" DUMP="$D" AB_SECONDS=100 \
  timeout -s INT 280 python3 scratch/probe_lazy.py > "$OUT/probe-console.txt" 2>&1; echo "probe rc=$?"
ls -la "$D" > "$OUT/sass/dump-listing.txt"
"$B/ptxas" --version | tail -1 > "$OUT/sass/ptxas-version.txt"
for p in "$D"/*.ptx; do
  n="$OUT/sass/$(basename "${p%.ptx}")"
  "$B/ptxas" -arch=sm_90a -O3 -v "$p" -o /tmp/k.cubin > "$n.asm-ptxas.txt" 2>&1
  "$B/nvdisasm" -c /tmp/k.cubin 2>&1 | gzip > "$n.sass.gz"; gzip -c "$p" > "$n.ptx.gz"
done
for f in "$D"/*.ptxas; do cp "$f" "$OUT/sass/"; done 2>/dev/null
grep -il "serializ\|performance" "$OUT"/sass/*.ptxas "$OUT"/sass/*.asm-ptxas.txt 2>/dev/null
grep -h "serializ" "$OUT"/sass/*.ptxas "$OUT"/sass/*.asm-ptxas.txt 2>/dev/null | sort | uniq -c | head
python3 - "$OUT/sass" <<'PY'
import collections, gzip, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
for f in sorted(root.glob("*.sass.gz")):
    ops = collections.Counter()
    for line in gzip.open(f, "rt"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    top = ", ".join(f"{k} {ops[k]}" for k in ("FMUL", "FFMA", "FADD", "FMNMX", "MUFU", "BRA", "BSSY", "BSYNC",
                                                  "WARPSYNC", "HGMMA", "WARPGROUP", "FSETP", "FSEL", "MOV", "LDL", "STL"))
    print(f"{f.name}: {sum(ops.values())} instructions; {top}")
PY
tail -n 12 "$OUT/probe-console.txt"
