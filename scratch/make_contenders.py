"""Run AJ: the shipped table's D=64 entries of the bench's buckets as contenders (winner and fallbacks, so the
re-measured entry stays whole; the no-cap one's runner-ups too), plus the winner at 192-key blocks with 2 and 3
stages (4 do not fit SMEM). Usage: python make_contenders.py SHIPPED OUT"""
import json
import sys

BUCKETS = ("d64-none-many-rows", "d64-tanh-many-rows")
src, dst = sys.argv[1], sys.argv[2]
table = json.load(open(src))
entries = {}
for key, e in table["entries"].items():
    if e["bucket_name"] not in BUCKETS:
        continue
    held = [e["config"], *(f["config"] for f in e.get("fallbacks", ()))]
    extra = [r["config"] for r in e.get("runner_ups", ())] if e["bucket_name"] == "d64-none-many-rows" else []
    extra += [{**e["config"], "block_kv": 192, "num_stages": s} for s in (2, 3)]
    # A held config needs a time to be read as one (the table's schema); the sweep times every one again.
    entries[key] = {**e, "runner_ups": [{"config": c, "median_us": 0.0} for c in extra if c not in held]}
    print(e["bucket_name"], len(held), "held +", len(entries[key]["runner_ups"]), "more")
table["entries"] = entries
json.dump(table, open(dst, "w"), indent=1, sort_keys=True)
