#!/usr/bin/env bash
# Run AE, call 2: PTX, ptxas report and SASS (with source lines) of main's kernel, attempt 17 variant B and attempt
# 17c at the shipped D=64 tiles (tanh and none); compile only. Usage (repo root): bash probe/run.sh OUTDIR
set -u
OUT=$1; W=/tmp/probe-ae; mkdir -p "$W"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
B=/usr/local/cuda-13.0/bin
"$B/ptxas" --version | tail -1 > "$W/ptxas-version.txt"
for v in ${PROBE_VARIANTS:-main a17b a17c}; do
  for cap in tanh none; do
    d=/tmp/dump/$v-$cap; rm -rf "$d"; mkdir -p "$d"
    (cd probe && PYTHONPATH=v_$v:../.devdeps MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO="$d" \
      timeout -s INT 150 python3 probe_sass.py "$cap") > "$W/$v-$cap-console.txt" 2>&1
    echo "$v-$cap compile rc=$?"
    cp "$d"/*.ptxas "$W/$v-$cap.mosaic-ptxas.txt" 2>/dev/null
    n=$W/$v-$cap; cat "$d"/*.ptx > "$n.ptx"
    "$B/ptxas" -arch=sm_90a -O3 -v "$n.ptx" -o "$n.cubin" > "$n.asm-ptxas.txt" 2>&1
    "$B/nvdisasm" -c -g "$n.cubin" > "$n.sass" 2>&1
    echo "$v-$cap: $(grep -E 'registers|spill' "$n.asm-ptxas.txt" | tr '\n' ' ') sass lines $(wc -l < "$n.sass")"
    gzip -f "$n.ptx" "$n.sass"; rm -f "$n.cubin"
  done
done
tar czf "$OUT/probe-ae.tgz" -C "$W" .
