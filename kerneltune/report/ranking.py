"""The report's ranking of a frame of candidates (``frame.load_frame``), as its CSV gives it: the HTML page ranks
each bucket's candidates the same way (``html._bucket``)."""

from __future__ import annotations

import pandas as pd

RANKED_STATUSES = ("ok", "stopped early")  # what the report ranks: verified and timed (or statically scored)
# Columns of the report's CSV that only some sweeps fill: left out where no row has a value (``score``: a
# compile-only sweep's modelled µs).
ONLY_WHERE_FILLED = ("score",)


def ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """The report's frame as its CSV gives it: a ``rank`` per bucket and kernel source (1 the fastest; by median, a
    compile-only sweep's by its static score), each run's buckets in name order, the current source first (its
    newest record's), its ranked candidates first and its failed or refused ones after them, unranked, in journal
    order; ``ONLY_WHERE_FILLED`` columns no row fills left out. As the HTML page ranks them."""
    out = frame.copy()
    eligible = out["status"].isin(RANKED_STATUSES) & (out["median_us"].notna() | out["score"].notna())
    source = out["kernel_hash"].fillna("?").astype(str)
    group = [out["kernel"].fillna("?").astype(str), out["run"].astype(str), out["bucket"].astype(str), source]
    timed = out.groupby(group[:3])["median_us"].transform(lambda m: m.notna().any())
    value = out["median_us"].where(timed, out["score"]).where(eligible)
    out["rank"] = value.groupby(group).rank(method="min").astype("Int64")
    newest = out["time"].fillna("").groupby(group).transform("max")
    order = pd.DataFrame({"k": group[0], "r": group[1], "b": group[2], "newest": newest, "s": source,
                          "unranked": out["rank"].isna(), "rank": out["rank"]}, index=out.index)
    keys = order.sort_values(["k", "r", "b", "newest", "s", "unranked", "rank"],
                             ascending=[True, True, True, False, True, True, True], kind="stable").index
    out = out.loc[keys]
    columns = list(out.columns)
    columns.insert(columns.index("bucket") + 1, columns.pop(columns.index("rank")))
    return out[[c for c in columns if c not in ONLY_WHERE_FILLED or out[c].notna().any()]]
