"""The cost model's figures at the space's buckets: every layout of search_spaces/drafter_wide.toml that the
offline compile found feasible (its journal's ok records: no spill, the grid co-resident), the best by modelled
time with its phases. `python3 modelled.py JOURNAL` from the repository root (CPU)."""

import itertools
import json
import sys
import tomllib

from kerneltune.kernels.drafter_wide.cost_model import model
from kerneltune.kernels.drafter_wide.layout import DrafterLayout, LayoutError

space = tomllib.load(open("search_spaces/drafter_wide.toml", "rb"))
feasible = {(r["bucket"], r["tiles"]["ng"], r["tiles"]["threads"], r["tiles"]["w_na"])
            for r in map(json.loads, open(sys.argv[1])) if r["status"] == "ok"}
params = space["params"]
print("bucket | layouts | best (ng, threads, w_na) | us/layer | floor us | x floor | phases us")
for bucket in space["buckets"]:
    p = bucket["problem"]
    modelled = []
    for ng, threads, w_na in itertools.product(params["ng"], params["threads"], params["w_na"]):
        if (bucket["name"], ng, threads, w_na) not in feasible:
            continue
        try:
            layout = DrafterLayout(ng=ng, threads=threads, w_na=w_na, qpr=p["qpr"])
            layout.check_rows(p["requests"] * p["qpr"])
        except LayoutError:
            continue
        modelled.append((model(layout, p["arch"], p["requests"], p["context"]), (ng, threads, w_na)))
    m, best = min(modelled, key=lambda mb: mb[0].us_per_layer)
    phases = ", ".join(f"{k} {v:.1f}" for k, v in m.phases_us.items())
    print(f"{bucket['name']} | {len(modelled)} | {best} | {m.us_per_layer:.1f} | {m.floor_us_per_layer:.1f} | "
          f"{m.us_per_layer / m.floor_us_per_layer:.2f} | {phases}")
