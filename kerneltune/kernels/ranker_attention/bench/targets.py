"""Performance targets of a bench, stated as ratios within one run and checked against its rows.

A target is declared in the bench's shapes TOML (``[[targets]]``) so the run that measures also says
which targets it met: either a speedup over another implementation (its median time over ours) or
the fraction of the dense rate that our useful rate reaches (against the fastest dense baseline of
the same run, the upper bound that ignores the mask and the cap), or the user's jitted call against
its kernels (their CUPTI time back to back over the wall time per call in a loop of calls).

A dense fraction is judged on the settled rounds where the row has them (``settled_dense_fraction``: ours
and each dense baseline taking turns long enough for the power-capped clock to follow each one, the
median ratio of the rounds against the faster baseline), so each is timed at its own sustained clock
under the same heat. Rows without them (benches recorded before settled rounds) fall back to the paired rounds of
short turns (``paired_dense_fraction``), in which each implementation ran at the clock the other left;
rows without those (recorded before paired rounds) to the unpaired bound: the dense problem of a shape is the same
whatever the cap, and each cap's rows time it again; the fastest of those timings is the bound, so one
slow re-timing (cuDNN at T=8k varied by 10% within one bench) cannot flatter the fraction. Each verdict
says which bound it used and carries the others' values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The baselines whose dense rate bounds ours (fastest one wins).
DENSE_IMPLS = ("cudnn_dense", "jax_mgpu_dense")
METRICS = ("speedup", "dense_fraction", "kernel_over_call")


@dataclass(frozen=True)
class Target:
    """``metric`` of kerneltune on every bench row of ``caps`` and ``head_dims`` must reach ``at_least``."""

    name: str
    metric: str
    caps: tuple[str, ...]
    head_dims: tuple[int, ...]
    at_least: float
    over: str | None = None  # the implementation a speedup is measured against

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric: {self.metric!r} is not one of {', '.join(METRICS)}")
        if (self.metric == "speedup") != (self.over is not None):
            raise ValueError("over: a speedup names the implementation it is over; a dense fraction does not")
        if not self.at_least > 0:
            raise ValueError(f"at_least: must be > 0, got {self.at_least}")


def parse_targets(entries: list[dict[str, Any]], where: str) -> list[Target]:
    """Targets from a TOML ``[[targets]]`` array; errors name the entry and the field."""
    targets = []
    for i, t in enumerate(entries):
        try:
            targets.append(Target(name=str(t["name"]), metric=str(t["metric"]),
                                  caps=tuple(str(c) for c in t["caps"]),
                                  head_dims=tuple(int(d) for d in t["head_dims"]),
                                  at_least=float(t["at_least"]), over=t.get("over")))
        except KeyError as e:
            raise ValueError(f"{where}: targets[{i}]: missing field {e}") from None
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: targets[{i}] ({t['name']}): {e}") from None  # a name: no KeyError
    return targets


def _note(head: str, *others: tuple[str, float | None]) -> str:
    """A dense verdict's note: the bound it used, then the other bounds' values where the row has them."""
    return head + "".join(f"; {name} {v:.2f}" for name, v in others if v is not None)


def evaluate(targets: list[Target], rows: list[dict[str, Any]], head_dims: dict[str, int]) -> list[dict[str, Any]]:
    """One verdict per (target, shape, cap) the run measured: value, threshold, and met / missed /
    n/a (n/a: kerneltune or the baseline the target needs failed or did not run)."""
    by_impl: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r.get("error") is None and r.get("median_ms"):
            by_impl.setdefault((r["shape"], r["cap_method"]), {})[r["impl"]] = r
    measured = dict.fromkeys((r["shape"], r["cap_method"]) for r in rows)  # in the run's order
    dense_bound: dict[str, float] = {}
    for (shape, _), impls in by_impl.items():
        for d in DENSE_IMPLS:
            if d in impls:
                dense_bound[shape] = max(dense_bound.get(shape, 0.0), impls[d]["dense_tflops"])
    out = []
    for t in targets:
        for shape, cap in measured:
            if cap not in t.caps or head_dims.get(shape) not in t.head_dims:
                continue
            impls = by_impl.get((shape, cap), {})
            ours = impls.get("kerneltune")
            value, extra = None, {}
            if ours is not None and t.metric == "speedup" and t.over in impls:
                value = impls[t.over]["median_ms"] / ours["median_ms"]
            elif ours is not None and t.metric == "dense_fraction":
                unpaired = ours["useful_tflops"] / dense_bound[shape] if shape in dense_bound else None
                paired = ours.get("paired_dense_fraction")
                if (value := ours.get("settled_dense_fraction")) is not None:
                    extra = {"bound": "settled", "paired_value": paired, "unpaired_value": unpaired,
                             "note": _note("settled turns", ("short turns", paired), ("unpaired", unpaired))}
                elif (value := paired) is not None:
                    extra = {"bound": "paired", "unpaired_value": unpaired,
                             "note": _note("rounds in turns", ("unpaired", unpaired))}
                elif unpaired is not None:
                    value, extra = unpaired, {"bound": "fastest unpaired", "note": "fastest unpaired timing"}
            elif ours is not None and t.metric == "kernel_over_call":
                value = ours.get("kernel_over_call")
            verdict = "n/a" if value is None else "met" if value >= t.at_least else "missed"
            out.append({"target": t.name, "shape": shape, "cap_method": cap, "value": value,
                        "at_least": t.at_least, "verdict": verdict, **extra})
    return out
