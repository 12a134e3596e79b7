"""The shapes users run, as the interpreted kernel's checks run them: each a layout (threads, attention
blocks, rows a request, layers) and a step (requests, contexts) chosen for what it reaches that the default
check shape does not. ``interpreted.setup`` builds any of them; ``interpret_check.check_interpreted`` takes one as
``shape`` (``Shape.as_check``).

Window arithmetic (small model: 512 keys, blocks of 16): a request whose first row sits at position ``c``
sees keys from ``c - 511``, so a context ``c = 16k + 15`` puts the window's low edge on a block boundary;
its last key is ``c + qpr - 1``, so ``c + qpr = 16k`` puts the high edge on one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    why: str
    arch: str
    threads: int
    requests: int
    qpr: int
    context: tuple[int, ...]
    layers: int
    w_na: int
    full: bool = False  # the full model (hidden 6144, intermediate 12288 over 4 ranks, window 4096)

    def as_check(self) -> dict:
        """The ``shape`` argument of ``check_interpreted``."""
        return {"requests": self.requests, "qpr": self.qpr, "context": self.context, "layers": self.layers,
                "w_na": self.w_na, "threads": self.threads, "full": self.full}


# What ``verify --interpret`` runs besides its default shape (``interpreted.CHECK_EXTRA``), each in the fixed order:
# the shapes that reach, at a verify's cost, what the default never does.
VERIFY_EXTRA = Shape(
    "one request of 20 rows", "a single request, 512 threads, a second token tile (20 rows; three a wave in the "
    "attention: a wave's loop over its rows at a middle trip), a third layer, the window's low edge on a block "
    "(527 - 511 = 16) and a first row that sees none of the newest block's keys (527 = 16k + 15)",
    "gfx950", 512, 1, 20, (527,), 3, 16)
VERIFY_ROWS = Shape(
    "52 rows of 13", "four token tiles, so that the final gather's rows 48-63 run (52 rows: 13 a request, which no "
    "tile divides), 256 threads", "gfx942", 256, 4, 13, (30, 100, 5, 700), 1, 32)
FULL_256 = Shape("full model at 256 threads", "the full model's GEMV tiles and 6144-wide norms, 256 threads: 12 "
                 "chunks a weight row, more than a lane holds (the G blocks' path for unheld weights)", "gfx942",
                 256, 2, 2, (15, 300), 1, 32, full=True)
VERIFY_SHAPES = (VERIFY_EXTRA, VERIFY_ROWS, FULL_256)

MATRIX: tuple[Shape, ...] = (
    VERIFY_EXTRA,
    VERIFY_ROWS,
    Shape("64 rows at 512 threads", "four token tiles (rows 48-63 of the final gather), the seed's 512 threads, "
          "16 rows a request (4 trips of a wave's rows); window low edge on a block (527), high edges on one "
          "(640, 16)", "gfx942", 512, 4, 16, (527, 640, 16, 1000), 1, 32),
    Shape("63 rows of 7 at 256 threads", "nine requests of the seed's 7 rows: a row count no tile divides, "
          "W_NA 64 over 9 requests (one block idle), two layers", "gfx950", 256, 9, 7,
          (527, 9, 100, 200, 300, 400, 505, 600, 1000), 2, 64),
    Shape("one request, three layers", "a single request of 7 rows, its window's low edge on a block, 16 "
          "chunks of about 2 blocks, a third layer's tags", "gfx950", 512, 1, 7, (527,), 3, 16),
    Shape("three requests at a block's end", "3 requests over 32 blocks (2 idle), contexts whose rows end a "
          "block and one whose newest block holds only later rows' keys (m = -inf for its first row)",
          "gfx942", 256, 3, 7, (25, 9, 1039), 3, 32),
    FULL_256,
    Shape("full model at 512 threads", "the full model at the seed's 512 threads, gfx950", "gfx950", 512, 2, 2,
          (46, 4000), 1, 32, full=True),
)
