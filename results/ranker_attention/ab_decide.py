"""Decide an A/B/A kernel comparison from its sweep journals (run F, call 1).

For each bucket: the best persistent time of the patched kernel (B) against the mean over the two
adopted-kernel runs (A) of their best persistent time. The patch is adopted when every B candidate
passed its check, the geometric mean of A/B is at least 1.01 and no bucket is below 0.995.

Usage: python3 ab_decide.py A1_DIR B_DIR A2_DIR  (prints the table; exit status 0 = adopt, 1 = keep A)
"""

import json
import math
import sys
from pathlib import Path


def best(run: Path) -> tuple[dict[str, float], dict[str, float], bool]:
    """(best persistent us per bucket, best one-CTA-per-tile us per bucket, every candidate ok)."""
    pers: dict[str, float] = {}
    plain: dict[str, float] = {}
    ok = True
    for path in sorted(run.glob("journals/*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("status") != "ok":
                ok = False
                continue
            into = pers if rec["tiles"].get("persistent") else plain
            us = rec["timing"]["median_us"]
            into[rec["bucket"]] = min(into.get(rec["bucket"], math.inf), us)
    return pers, plain, ok


def main() -> int:
    (a1, a1_plain, ok_a1), (b, b_plain, ok_b), (a2, a2_plain, ok_a2) = (best(Path(p)) for p in sys.argv[1:4])
    ratios = []
    # The one-CTA-per-tile path is the same code in A and B: its spread across the runs is the drift.
    print(f"{'bucket':20} {'A1 pers':>9} {'B pers':>9} {'A2 pers':>9} {'A/B':>6} {'A1 plain/pers':>13} "
          f"{'plain A1:B:A2':>22}")
    for bucket in sorted(a1):
        a = (a1[bucket] + a2.get(bucket, a1[bucket])) / 2
        r = a / b.get(bucket, math.inf)
        ratios.append(r)
        print(f"{bucket:20} {a1[bucket]:9.1f} {b.get(bucket, math.nan):9.1f} {a2.get(bucket, math.nan):9.1f} "
              f"{r:6.3f} {a1_plain.get(bucket, math.nan) / a1[bucket]:13.3f} "
              f"{' : '.join(f'{x.get(bucket, math.nan):6.1f}' for x in (a1_plain, b_plain, a2_plain)):>22}")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 0.0
    adopt = ok_b and len(ratios) == 3 and geo >= 1.01 and min(ratios) >= 0.995
    print(f"checks ok: A1 {ok_a1} B {ok_b} A2 {ok_a2}; geomean A/B {geo:.3f}: {'adopt B' if adopt else 'keep A'}")
    return 0 if adopt else 1


if __name__ == "__main__":
    sys.exit(main())
