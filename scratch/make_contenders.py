"""Attempt 24's re-measure: every shipped entry's configs (winner, runner-ups, fallbacks) as contenders, each with
`pv_in_flight` off (as shipped) and on where the space offers it (persistent, P in registers).
Usage: python scratch/make_contenders.py SHIPPED OUT"""
import json
import sys
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
table = json.loads(src.read_text())
for e in table["entries"].values():
    held = [e["config"], *(r["config"] for r in e.get("runner_ups", ())),
            *(f["config"] for f in e.get("fallbacks", ()))]
    extra = [{**c, "pv_in_flight": True} for c in held if c.get("persistent") and c.get("p_in_registers", True)]
    # A held config needs a time to be read as one (the table's schema); the sweep times every one again.
    e["runner_ups"] = [*e.get("runner_ups", ()), *({"config": c, "median_us": 0.0} for c in extra)]
    print(e["bucket_name"], len(held), "held +", len(extra), "in flight")
dst.write_text(json.dumps(table, indent=1, sort_keys=True))
