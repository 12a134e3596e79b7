"""The re-sweep space after attempt 9 (static-max.patch): run H's contenders in each bucket (every
persistent config and every config within 6% of the bucket's best, as run G chose run F's), each with
static_max=False, plus the static_max=True twin of every persistent contender in the buckets whose cap
allows it. Run it where the patch is applied (the default space then has the static_max param).

Usage: python3 make_static_max_space.py RUN_H_JOURNALS_DIR DEFAULT_SPACE OUT.toml
"""

import sys
from pathlib import Path

from make_resweep_space import FIELDS, WITHIN, allowed_constraint, contenders

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, static_max_refusal


def main() -> None:
    journals, default, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    tiles_fields = KernelConfig.TILE_FIELDS
    allowed, twins = [], 0
    for r in contenders(journals):
        tiles = {**r["tiles"], "static_max": False}
        allowed.append(tuple(r["problem"][f] for f in FIELDS) + tuple(tiles[t] for t in tiles_fields))
        twin = {**tiles, "static_max": True}
        config = KernelConfig.for_problem(Problem(**r["problem"]), **twin)
        if tiles["persistent"] and static_max_refusal(config) is None:
            allowed.append(tuple(r["problem"][f] for f in FIELDS) + tuple(twin[t] for t in tiles_fields))
            twins += 1
    why = (f"attempt 9 re-measures run H's contenders (every persistent config and every config within "
           f"{round((WITHIN - 1) * 100)}% of the bucket's best) and the static_max twin of each persistent one")
    out.write_text(default.read_text() + allowed_constraint(FIELDS + tiles_fields, allowed, why))
    print(f"{len(allowed)} configs, {twins} of them static_max twins")


if __name__ == "__main__":
    main()
