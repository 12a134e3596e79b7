#!/usr/bin/env bash
# Run AJ, call 2: ptxas's report and the SASS of the D=64 winners at 128- and 192-key blocks (compile only): the PTX
# dumped by Mosaic GPU, assembled by the device's CUDA 13.0 ptxas (-v) and disassembled by its nvdisasm; then per
# variant the registers, spills, wgmma serialisation warnings and an opcode histogram. Usage: bash probe_wide.sh OUT
set -u
OUT=$1; W=/tmp/probe-wide; mkdir -p "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=.:.devdeps XLA_PYTHON_CLIENT_PREALLOCATE=false
B=/usr/local/cuda-13.0/bin
"$B/ptxas" --version | tail -1 > "$W/tools.txt"
for cap in none tanh; do
  for kv in 128 192; do
    d=/tmp/dump-$cap-$kv; rm -rf "$d"; mkdir -p "$d"
    MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO="$d" timeout 120 python3 scratch/probe_wide.py $cap $kv > "$W/$cap-$kv-console.txt" 2>&1 &
  done
done
wait
for cap in none tanh; do
  for kv in 128 192; do
    n=$W/$cap-$kv; cat /tmp/dump-$cap-$kv/*.ptx > "$n.ptx"
    "$B/ptxas" -arch=sm_90a -O3 -v "$n.ptx" -o "$n.cubin" > "$n.asm-ptxas.txt" 2>&1
    "$B/nvdisasm" -c -g "$n.cubin" 2>&1 | gzip > "$n.sass.gz"
    gzip "$n.ptx"; rm -f "$n.cubin"
    echo "== $cap-$kv: $(grep -h -E 'registers|spill|serializ' "$n.asm-ptxas.txt" | tr '\n' ' ')"
  done
done
python3 - "$W" <<'PY'
import collections, gzip, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
for f in sorted(root.glob("*.sass.gz")):
    ops = collections.Counter()
    for line in gzip.open(f, "rt"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    print(f"{f.name}: {sum(ops.values())} instructions; LDL {ops['LDL']} STL {ops['STL']};",
          dict(ops.most_common(14)))
PY
tar czf "$OUT/probe-wide.tgz" -C "$W" .
