"""The drafter's random master weights, drawn matrix by matrix when a reader asks for one, and held only while it
is read: ``reference.make_weights``'s weights, bit for bit, for the interpreted checks (``interpreted.setup``).

Every weight comes from one torch generator, in one order (per layer ``in_ln, qkv, q_norm, k_norm, o, post_ln,
gate, up, down``, then ``final_ln``), as ``reference.make_weights`` draws them: the same seed gives the same bits
(``tests/kernels/drafter_wide/test_master_weights.py``). Held at once they are what kept ``verify --interpret``
above a CI runner's memory (the full model's 330 M weights are 2.6 GB as float64, the 512-thread check shape's
three layers 4 GB). Here a GEMV matrix is drawn when read and kept until another is, and the generator's state is
saved at each draw, so a matrix read again after others is drawn again from its own state (the same bits), never
kept beside them. The norm vectors are kept (a few KB). Readers go through the layers in the order they were drawn
(``packing.pack_ranks``, ``reference.forward_f64``, ``error_model.element_model``): one draw of each matrix a pass,
as before; a reader that goes back pays a draw, not memory. (reference.py keys the kernel's source hash, so this
lives beside it rather than in it.)"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .reference import Weights

NAMES = ("in_ln", "qkv", "q_norm", "k_norm", "o", "post_ln", "gate", "up", "down")  # a layer's, in draw order
GEMVS = ("qkv", "o", "gate", "up", "down")


@dataclass(frozen=True)
class _Draw:
    layer: int | None  # None: final_ln
    name: str
    shape: tuple[int, ...]

    @property
    def gemv(self) -> bool:
        return len(self.shape) == 2


class DrawnWeights:
    """``reference.Weights``, drawn when read: float64 master weights, per layer (``layers[i]``, a mapping):
    ``in_ln, qkv [rows, H], q_norm, k_norm, o [H, Hq*D], post_ln, gate, up [I, H], down [H, I]``; ``final_ln``.
    GEMV rows ~1/sqrt(fan_in) (drawn and scaled in float32, 3x faster than float64 draws, so every value is a
    float32's), norms near 1."""

    def __init__(self, d: Any, seed: int) -> None:
        qkv_rows = (d.q_heads + 2 * d.kv_heads) * d.head_dim
        shapes = {"in_ln": (d.hidden,), "qkv": (qkv_rows, d.hidden), "q_norm": (d.head_dim,),
                  "k_norm": (d.head_dim,), "o": (d.hidden, d.q_heads * d.head_dim), "post_ln": (d.hidden,),
                  "gate": (d.intermediate, d.hidden), "up": (d.intermediate, d.hidden),
                  "down": (d.hidden, d.intermediate)}
        self._draws = [_Draw(layer, k, shapes[k]) for layer in range(d.layers) for k in NAMES]
        self._draws.append(_Draw(None, "final_ln", (d.hidden,)))
        self._at = {(w.layer, w.name): i for i, w in enumerate(self._draws)}
        self._g = torch.Generator().manual_seed(seed)
        self._states = {0: self._g.get_state()}  # the generator's state before draw i
        self._next = 0  # the draw the generator stands before
        self._kept: dict[int, torch.Tensor] = {}  # the norm vectors, once drawn
        self._last: tuple[int, torch.Tensor] | None = None  # the last GEMV matrix read, float32 or float64
        self.layers: Sequence[Mapping[str, torch.Tensor]] = tuple(_Layer(self, i) for i in range(d.layers))
        self.draws = 0  # GEMV matrices drawn so far: what a test counts to see a reader go in order

    @property
    def final_ln(self) -> torch.Tensor:
        return self._get(self._at[(None, "final_ln")], torch.float64)

    def release(self) -> None:
        """Let the last matrix read go (a reader done with the weights for now; the next read draws it again)."""
        self._last = None

    def gemv32(self, layer: int, name: str) -> torch.Tensor:
        """A GEMV matrix as drawn, in float32 (every value exact): what the 8-bit packing reads, at half the bytes."""
        return self._get(self._at[(layer, name)], torch.float32)

    def _get(self, i: int, dtype: torch.dtype) -> torch.Tensor:
        if i in self._kept:
            return self._kept[i]
        if not self._draws[i].gemv:  # a norm vector: drawn into ``_kept``, the last matrix left where it is
            self._seek(i)
            return self._draw(self._draws[i])
        if self._last is None or self._last[0] != i:
            self._last = None  # let the previous matrix go before the next is drawn
            self._seek(i)
            self._last = (i, self._draw(self._draws[i]))
        t = self._last[1]
        if t.dtype == dtype:
            return t
        if dtype == torch.float32:  # held as float64 already: its values are float32's
            return t.to(torch.float32)
        self._last = (i, t.to(torch.float64))  # the float64 kept instead of the float32, not beside it
        return self._last[1]

    def _seek(self, i: int) -> None:
        """Stand the generator before draw ``i``: from the nearest saved state at or before it, drawing (and
        keeping only the norm vectors of) the draws between."""
        if self._next != i:
            start = max(j for j in self._states if j <= i)
            self._g.set_state(self._states[start])
            self._next = start
        while self._next < i:
            self._draw(self._draws[self._next])

    def _draw(self, w: _Draw) -> torch.Tensor:
        """Draw ``w`` at the generator's place (the next one), saving the state after it."""
        g = self._g
        if w.gemv:
            rows, cols = w.shape
            t = torch.randn(rows, cols, generator=g, dtype=torch.float32).mul_(cols ** -0.5)
            self.draws += 1
        else:
            t = 1.0 + 0.1 * torch.randn(w.shape[0], generator=g, dtype=torch.float64)
            self._kept[self._next] = t
        self._next += 1
        self._states.setdefault(self._next, g.get_state())
        return t


class _Layer(Mapping[str, torch.Tensor]):
    """One layer's weights by name, each drawn when read (float64)."""

    def __init__(self, weights: DrawnWeights, layer: int) -> None:
        self._w, self._layer = weights, layer

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in NAMES:
            raise KeyError(name)
        return self._w._get(self._w._at[(self._layer, name)], torch.float64)

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


def gemv32(weights: Weights | DrawnWeights, layer: int, name: str) -> torch.Tensor:
    """A GEMV matrix's values for the 8-bit packing, which rounds them to float32 first: ``DrawnWeights``' float32 as
    drawn (no float64 copy of it made), or ``reference.Weights``' float64 as held."""
    if isinstance(weights, DrawnWeights):
        return weights.gemv32(layer, name)
    return weights.layers[layer][name]

