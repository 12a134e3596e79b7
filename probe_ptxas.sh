#!/usr/bin/env bash
# Run Y's follow-up: ptxas's report and the SASS of the D=64 tanh and no-cap tiles in batch order, ranked only
# (probe_rank), longest first and batch then longest, then per variant the registers, spills and an opcode histogram, and the
# opcodes whose counts differ from batch order's. Usage (at this branch's root): bash probe_ptxas.sh OUTDIR
set -u
OUT=$1
export PYTHONUNBUFFERED=1 PYTHONPATH=.:.devdeps:../.devdeps
mkdir -p "$OUT/ptxas"
for cap in tanh none; do
  for order in batch probe_rank longest_first batch_then_longest; do
    d=/tmp/ptxas-dump/$cap-$order; rm -rf "$d"; mkdir -p "$d"
    MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_TO="$d" \
      timeout -s INT 120 python3 probe_ptxas.py "$cap" "$order" > "$OUT/ptxas/$cap-$order-console.txt" 2>&1
    echo "rc=$?" >> "$OUT/ptxas/$cap-$order-console.txt"
    cp "$d"/*.ptxas "$OUT/ptxas/$cap-$order.ptxas" 2>/dev/null
    cat "$d"/*.sass 2>/dev/null | gzip > "$OUT/ptxas/$cap-$order.sass.gz"
  done
done
python3 - "$OUT/ptxas" <<'PY'
import collections, gzip, pathlib, re, sys
root = pathlib.Path(sys.argv[1])
hist = {}
for f in sorted(root.glob("*.sass.gz")):
    ops = collections.Counter()
    for line in gzip.open(f, "rt"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    hist[f.name.removesuffix(".sass.gz")] = ops
for name, ops in hist.items():
    ptxas = root / f"{name}.ptxas"
    info = [l.strip() for l in ptxas.read_text().splitlines() if re.search(r"registers|spill|stack|C7", l)] \
        if ptxas.exists() else ["(no ptxas report)"]
    print(f"== {name}: {sum(ops.values())} instructions; LDL {ops['LDL']} STL {ops['STL']}")
    print("  ", *info[:6], sep="\n   ")
    base = hist.get(name.split("-")[0] + "-batch")
    if base is not None and base is not ops:
        diff = {k: ops[k] - base[k] for k in set(ops) | set(base) if ops[k] != base[k]}
        print("   vs batch:", dict(sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:25]))
PY
