"""The sweep's compile queue replayed on recorded compile times (issue 56): W compile workers take candidates in
the order proposed; the timing worker measures them in that order, each taking its recorded check + timing (+30 ms
of hand-over); a candidate is proposed when fewer than DEPTH are in flight. The one-entry record's cold sweeps
(results/engine/2026-12-05-one-entry/call1/w14-*.jsonl, call3/cold-*.jsonl, 14 workers, depth 15) are
reproduced within 2% by depth 15; the model then says what another depth would have done on those compiles. The
last column moves the bucket's first candidate's references (reference_s: nearly all XLA's compile of the
reference) out of the timing worker into a compile job handed over ahead of the bucket's first candidate, at
depth 65, as the compile workers now compile a bucket's check programs.

    python3 results/engine/2026-12-05-one-entry/queue_model.py JOURNAL... [--workers 14]
"""
from __future__ import annotations

import heapq
import json
import sys
from pathlib import Path

MEASURE = ("inputs_s", "reference_s", "check_s", "timing_s")


def bucket_wall(compile_s: list[float], measure_s: list[float], workers: int, depth: int,
                check_s: float = 0.0) -> float:
    """The bucket's wall with ``depth`` candidates in flight (proposed, not yet measured); ``check_s``: a compile
    job ahead of the first candidate, which its measurement waits for."""
    free = [0.0] * workers
    ready = 0.0
    if check_s:
        ready = check_s
        heapq.heapreplace(free, check_s)
    done: list[float] = []  # when each proposed candidate's compile ends

    def propose(now: float, measured: int) -> None:
        while len(done) < len(compile_s) and len(done) - measured < depth:
            start = max(heapq.heappop(free), now)
            done.append(start + compile_s[len(done)])
            heapq.heappush(free, done[-1])

    t = 0.0
    propose(t, 0)
    for i, seconds in enumerate(measure_s):
        t = max(t, done[i], ready) + seconds
        propose(t, i + 1)
    return t


def main() -> None:
    args = sys.argv[1:]
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 14
    depths = (1 + workers, 1 + 2 * workers, 1 + 3 * workers, 1 + 64)  # one, two, three rounds; COMPILE_QUEUE
    print(f"{workers} workers; per bucket: measured wall | the model's at depths {depths} | at depth {depths[-1]} "
          f"with the check programs compiled ahead; then both buckets' sum")
    for path in (a for a in args if a.endswith(".jsonl")):
        recs = [json.loads(line) for line in Path(path).read_text().splitlines()]
        sums = [0.0] * (2 + len(depths))
        for bucket in sorted({r["bucket"] for r in recs if r.get("phases")}):
            rs = [r for r in recs if r["bucket"] == bucket and r.get("phases")]
            c = [r["phases"]["compile_s"] for r in rs]
            m = [sum(r["phases"].get(k, 0.0) for k in MEASURE) + 0.03 for r in rs]
            ref = rs[0]["phases"].get("reference_s", 0.0)
            ahead = bucket_wall(c, [m[0] - ref, *m[1:]], workers, depths[-1], check_s=ref)
            walls = [sum(r["phases"]["wall_s"] for r in rs), *(bucket_wall(c, m, workers, d) for d in depths), ahead]
            sums = [a + b for a, b in zip(sums, walls, strict=True)]
            print(f"  {path} {bucket} ({len(rs)} candidates): " + " | ".join(f"{w:.1f}" for w in walls))
        print("  both: " + " | ".join(f"{w:.1f}" for w in sums))


if __name__ == "__main__":
    main()
