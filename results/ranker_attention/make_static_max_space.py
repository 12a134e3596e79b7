"""The re-sweep space after attempt 9 (static-max.patch): run H's contenders in each bucket (every
persistent config and every config within 6% of the bucket's best, as run G chose run F's), each with
static_max=False, plus the static_max=True twin of every persistent contender in the buckets whose cap
allows it. Run it where the patch is applied (the default space then has the static_max param).

Usage: python3 make_static_max_space.py RUN_H_JOURNALS_DIR DEFAULT_SPACE OUT.toml
"""

import json
import sys
from pathlib import Path

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, static_max_refusal

FIELDS = ("batch", "seq_len", "head_dim", "cap_method")
WITHIN = 1.06


def main() -> None:
    journals, default, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    tiles_fields = KernelConfig.TILE_FIELDS
    best: dict[str, dict[str, dict]] = {}
    for path in sorted(journals.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("status") == "ok":
                best.setdefault(r["bucket"], {}).setdefault(r["key"], r)
    allowed, twins = [], 0
    for records in best.values():
        fastest = min(r["timing"]["median_us"] for r in records.values())
        for r in records.values():
            if not (r["tiles"]["persistent"] or r["timing"]["median_us"] <= WITHIN * fastest):
                continue
            tiles = {**r["tiles"], "static_max": False}
            allowed.append(tuple(r["problem"][f] for f in FIELDS) + tuple(tiles[t] for t in tiles_fields))
            twin = {**tiles, "static_max": True}
            if tiles["persistent"] and static_max_refusal(
                    KernelConfig.for_problem(Problem(**r["problem"]), **twin)) is None:
                allowed.append(tuple(r["problem"][f] for f in FIELDS) + tuple(twin[t] for t in tiles_fields))
                twins += 1
    names = ", ".join(FIELDS + tiles_fields)
    listed = ",\n  ".join(repr(a) for a in sorted(allowed))
    why = (f"attempt 9 re-measures run H's contenders (every persistent config and every config within "
           f"{round((WITHIN - 1) * 100)}% of the bucket's best) and the static_max twin of each persistent one")
    constraint = f'\n[[constraints]]\nexpr = """({names}) in [\n  {listed}\n]"""\nwhy = "{why}"\n'
    out.write_text(default.read_text() + constraint)
    print(f"{len(allowed)} configs, {twins} of them static_max twins")


if __name__ == "__main__":
    main()
