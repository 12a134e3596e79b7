import pytest

from kerneltune.kernels.drafter_wide.layout import MAX_ROWS, DrafterLayout, LayoutError
from kerneltune.tuning.space import load_space

from ...paths import SPACES


def test_the_seeds_numbers_are_a_valid_layout():
    L = DrafterLayout(ng=192, threads=512, w_na=96)
    assert (L.QKV_R, L.QKV_N, L.O_R, L.GU_R, L.D_R, L.IR) == (12, 2304, 32, 16, 32, 3072)
    assert (L.ATT0, L.NORM0, L.BLOCKS) == (192, 288, 304)  # 304 = the CUs of an MI300X
    assert (L.chunks(6144), L.chunks(2048), L.chunks(3072)) == (6, 2, 3)  # the seed's chunk loops
    assert L.ROW_PAIRS == 3072 and L.pool_words * 4 <= 64 * 1024
    assert (L.THREADS, L.NG, L.W_NA, L.LAYERS, L.BLOCK, L.WINDOW) == (512, 192, 96, 1, 16, 4096)
    assert len({L.T_CACHE, L.T_NBLK, L.T_Q_NORM, L.T_K_NORM, L.T_IN_LN, L.T_POST_LN}) == 6 < L.TABLE_SLOTS


@pytest.mark.parametrize(("kw", "rule"), [
    (dict(ng=128), "QKV_R"), (dict(ng=256), "O_R"), (dict(threads=1024), "GEMV K"), (dict(threads=200), "THREADS"),
    (dict(threads=192), "THREADS"),
    (dict(w_na=32), "W_NA"), (dict(qpr=65), "QPR"), (dict(qpr=0), "QPR"), (dict(lds_bytes_limit=16 * 1024), "LDS pool"),
])
def test_broken_rules_are_named(kw, rule):
    with pytest.raises(LayoutError, match=rule):
        DrafterLayout(**kw)


def test_regions_do_not_overlap_and_rows_are_checked():
    L = DrafterLayout(ng=384, threads=256, w_na=128)
    offs = sorted({**L.W_L_OFF, **L.W_F_OFF}.values())
    assert offs == sorted(set(offs)) and max(offs) < L.W_LAYER_BYTES
    assert L.Y_RSO < L.Y_RSD < L.Y_AGX < L.Y_AGH < L.Y_AGF < L.Y_BYTES
    L.check_rows(MAX_ROWS)
    with pytest.raises(LayoutError, match="n_rows 65"):
        L.check_rows(65)
    with pytest.raises(LayoutError, match="n_rows 63 must be whole requests of QPR=2"):
        DrafterLayout(qpr=2).check_rows(63)


def test_a_layout_whose_offsets_collide_is_refused(monkeypatch):
    """The offsets are derived, so the checks guard an edit to that derivation: planted collisions fail."""
    offsets = dict(DrafterLayout().W_L_OFF)
    first, second = sorted(offsets, key=offsets.get)[:2]
    monkeypatch.setattr(DrafterLayout, "W_L_OFF", property(lambda self: {**offsets, second: offsets[first] + 8}))
    with pytest.raises(LayoutError, match=f"scratch regions overlap: {first} runs into {second}"):
        DrafterLayout()
    monkeypatch.undo()
    monkeypatch.setattr(DrafterLayout, "Y_RSD", property(lambda self: self.Y_RSO + 8))
    with pytest.raises(LayoutError, match="peer regions overlap: rso runs into rsd"):
        DrafterLayout()


def test_drafter_space_loads_and_every_config_is_a_layout_or_named_as_not():
    fields = {"arch", "requests", "qpr", "context", "layers"}
    space = load_space(SPACES / "drafter_wide.toml", {"ng", "threads", "w_na"}, fields)
    valid = 0
    for bucket in space.buckets:
        for tiles in space.configs(bucket.problem):
            try:
                DrafterLayout(**tiles, qpr=bucket.problem["qpr"])
                valid += 1
            except LayoutError:
                pass
    assert valid >= 8
