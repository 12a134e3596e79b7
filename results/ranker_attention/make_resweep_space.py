"""Run G's re-sweep space: the default space restricted to run F's contenders in each bucket (every
persistent config, and every config within 6% of the bucket's best), since adopting claimed tiles
changes the kernel hash and the table must be re-measured.

Usage: python3 make_resweep_space.py RUN_F_JOURNALS_DIR DEFAULT_SPACE OUT.toml
"""

import json
import sys
from pathlib import Path

FIELDS = ("batch", "seq_len", "head_dim", "cap_method")
TILES = ("block_q", "block_kv", "num_stages", "p_in_registers", "schedule_barrier", "mask_interior", "persistent",
         "fast_math")
WITHIN = 1.06


def contenders(journals: Path) -> list[dict]:
    """The ok records of a sweep's journals that are persistent or within WITHIN of their bucket's best."""
    best: dict[str, dict[str, dict]] = {}
    for path in sorted(journals.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("status") == "ok":
                best.setdefault(r["bucket"], {}).setdefault(r["key"], r)
    kept = []
    for records in best.values():
        fastest = min(r["timing"]["median_us"] for r in records.values())
        kept += [r for r in records.values()
                 if r["tiles"]["persistent"] or r["timing"]["median_us"] <= WITHIN * fastest]
    return kept


def allowed_constraint(names: tuple[str, ...], allowed: list[tuple], why: str) -> str:
    """A [[constraints]] entry that admits exactly the ``allowed`` tuples of ``names``."""
    listed = ",\n  ".join(repr(a) for a in sorted(allowed))
    return f'\n[[constraints]]\nexpr = """({", ".join(names)}) in [\n  {listed}\n]"""\nwhy = "{why}"\n'


def main() -> None:
    journals, default, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    allowed = [tuple(r["problem"][f] for f in FIELDS) + tuple(r["tiles"][t] for t in TILES)
               for r in contenders(journals)]
    why = (f"run G re-measures run F's contenders: every persistent config and every config within "
           f"{round((WITHIN - 1) * 100)}% of the bucket's best")
    out.write_text(default.read_text() + allowed_constraint(FIELDS + TILES, allowed, why))
    print(f"{len(allowed)} configs")


if __name__ == "__main__":
    main()
