"""The launch's index arithmetic: on integers, every address lands in its own region and every
task or row is covered once; on FlyDSL values, the same functions trace and compile offline."""

import itertools
import tempfile
from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide import indexing as ix
from kerneltune.kernels.drafter_wide.index_probe import N_ROWS, probe_values
from kerneltune.kernels.drafter_wide.layout import MAX_ROWS, TP, DrafterLayout

L = DrafterLayout(qpr=4)


def test_rows_have_one_owner_and_one_norm_block():
    seen = {(ix.owner_rank(t), ix.owner_slot(t)) for t in range(MAX_ROWS)}
    assert len(seen) == MAX_ROWS
    assert all(ix.own_row(ix.owner_slot(t), ix.owner_rank(t)) == t for t in range(MAX_ROWS))
    gathered = sorted(ix.gathered_row(j, c) for j in range(16) for c in range(4))
    assert gathered == list(range(MAX_ROWS))


def test_reduce_scatter_pairs_are_distinct_and_inside_their_region():
    words = [ix.rs_pair(L, L.Y_RSO, src, t, 0, p) for src in range(TP) for t in range(MAX_ROWS)
             for p in range(L.ROW_PAIRS) if ix.owner_rank(t) == 0]
    assert len(set(words)) == len(words)
    assert min(words) >= L.Y_RSO and max(words) + ix.PAIR_BYTES <= L.Y_RSD


def test_gathered_rows_and_flags_stay_in_their_regions():
    rows = [ix.ag_x8_row(L, L.Y_AGX, t) for t in range(MAX_ROWS)]
    assert rows[-1] + L.model.hidden + 8 <= L.Y_AGH
    assert ix.ag_bf_pair(L, L.Y_AGF, MAX_ROWS - 1, L.ROW_PAIRS - 1) + ix.PAIR_BYTES <= L.Y_BYTES
    flags = sorted(L.W_F_OFF.items(), key=lambda kv: kv[1])
    for (name, _), (_, nxt) in itertools.pairwise(flags):
        count = L._flag_counts()[name]
        assert ix.flag_word(L, name, count - 1) + 8 <= nxt


@pytest.mark.parametrize("cpr", [1, 3, 16, 96])
def test_chunks_cover_the_window_blocks_once(cpr):
    for n_blocks in (1, 2, 5, 257):
        covered = []
        for c in range(cpr):
            q0, cnt = ix.chunk(c, n_blocks, cpr)
            assert cnt >= 0
            covered += range(q0, q0 + cnt)
        assert covered == list(range(n_blocks))


def test_merge_tasks_cover_every_row_and_head_quarter_once():
    tasks = [ix.merge_task(L, task)[:2] for task in range(4 * MAX_ROWS)]
    assert sorted(tasks) == [(t, q) for t in range(MAX_ROWS) for q in range(4)]
    assert all(ix.merge_task(L, task)[2] == task // 4 // L.QPR for task in range(4 * MAX_ROWS))


def test_tile_rows_repeat_the_last_row_past_the_end():
    assert [ix.tile_row(3, l16, N_ROWS) for l16 in range(16)] == [48 + min(i, 12) for i in range(16)]
    assert ix.tile_count(N_ROWS) == 4
    assert probe_values(L, 5, N_ROWS)[2] == ix.tile_row(0, 5, N_ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_same_functions_trace_in_a_flydsl_kernel(arch, tmp_path, monkeypatch):
    from kerneltune.kernels.drafter_wide.offline_compile import compile_kernel

    monkeypatch.setenv("HOME", str(tmp_path))  # FlyDSL would keep what it compiles in ~/.flydsl
    k = len(probe_values(L, 0, N_ROWS))
    with tempfile.TemporaryDirectory() as tmp:
        report = compile_kernel("kerneltune.kernels.drafter_wide.index_probe:build_index_probe",
                                {"ng": 192, "threads": 512, "w_na": 96, "qpr": 4}, [["i32", [512 * k]]], arch, 512,
                                Path(tmp))
        isa = Path(report.isa_path).read_text()
    assert report.resources.vgpr_spill == 0 and report.resources.scratch_bytes == 0
    assert not (tmp_path / ".flydsl").exists()  # nothing written into the user's home
    # Every probed value reaches memory (stores of neighbouring values may merge into wider ones).
    assert isa.count("buffer_store") >= k // 4


@pytest.mark.parametrize(("threads", "k"), [(256, 6144), (512, 6144), (512, 2048), (256, 3072)])
def test_the_gemv_k_split_covers_each_byte_of_a_row_once(threads, k):
    layout = DrafterLayout(threads=threads)
    spans = [ix.k_offset(layout, c, w, g4) + b for c in range(layout.chunks(k)) for w in range(layout.waves)
             for g4 in range(4) for b in range(ix.K_CHUNK)]
    assert sorted(spans) == list(range(k))
    # A wave's chunk never straddles a head quarter of o_proj's input (one scale per quarter).
    for c, w in itertools.product(range(layout.chunks(k)), range(layout.waves)):
        first, last = ix.k_offset(layout, c, w, 0), ix.k_offset(layout, c, w, 3) + ix.K_CHUNK - 1
        assert first // (k // 4) == last // (k // 4) == ix.k_quarter(layout, c, w, k)


@pytest.mark.parametrize("threads", [256, 512])
def test_lds_partials_have_one_word_each_and_are_read_back_where_written(threads):
    layout = DrafterLayout(threads=threads)
    written = {}
    for slot, w, i, lane in itertools.product(range(2), range(layout.waves), range(4), range(64)):
        word = ix.red_word(layout, slot, w, i, lane)
        written[word] = (slot, w, ix.mfma_row(lane, i), lane % ix.TILE)
    assert len(written) == 2 * layout.waves * 256 and max(written) < layout.pool_words
    for slot, w, m, n in itertools.product(range(2), range(layout.waves), range(16), range(16)):
        assert written[ix.red_element(layout, slot, w, m, n)] == (slot, w, m, n)


def test_tags_are_distinct_growing_and_never_zero():
    """Every (launch, layer) has its own tag, later launches have larger ones (waiters ask for a tag at least
    as new as their own), and no tag is the zero a fresh flag word holds."""
    from kerneltune.kernels.drafter_wide import indexing as ix

    tags = {(s, layer): ix.tag(s, layer) for s in range(1, 50) for layer in range(8)}
    assert len(set(tags.values())) == len(tags) and min(tags.values()) > 0
    assert all(ix.tag(s + 1, 0) > ix.tag(s, 7) for s in range(1, 49))
    assert ix.tag(1, 0) == 9  # step * 8 + layer + 1


def test_flag_words_are_distinct_aligned_and_inside_the_layer():
    from kerneltune.kernels.drafter_wide import indexing as ix
    from kerneltune.kernels.drafter_wide.layout import DrafterLayout

    layout = DrafterLayout(qpr=4)
    words = [ix.flag_word(layout, name, i) for name, n in layout._flag_counts().items() for i in range(n)]
    assert len(set(words)) == len(words) and all(w % 8 == 0 for w in words)
    assert min(words) >= 0 and max(words) + 8 <= layout.W_LAYER_BYTES


def test_tags_grow_with_the_layer_within_a_launch():
    """Flags are shared by the layers: a layer's waiter, asking for a tag at least as new as its own, must
    not take an earlier layer's flag for its own."""
    assert all(ix.tag(s, layer + 1) > ix.tag(s, layer) for s in range(1, 50) for layer in range(7))


def test_lds_partials_fill_the_reduction_words_from_zero():
    words = sorted(ix.red_word(L, slot, w, i, lane)
                   for slot, w, i, lane in itertools.product(range(2), range(L.waves), range(4), range(64)))
    assert words == list(range(2 * L.waves * 256)) and all(isinstance(w, int) for w in words)


@pytest.mark.parametrize("n", range(1, MAX_ROWS + 1))
def test_tile_count_and_the_last_tiles_rows(n):
    assert ix.tile_count(n) == -(-n // 16)
    last = ix.tile_count(n) - 1
    assert [ix.tile_row(last, lane, n) for lane in range(16)] == [min(16 * last + lane, n - 1) for lane in range(16)]


def test_k_quarters_are_integers():
    quarters = {ix.k_quarter(L, c, w, 6144) for c in range(L.chunks(6144)) for w in range(L.waves)}
    assert quarters == {0, 1, 2, 3} and all(isinstance(q, int) for q in quarters)


def test_qkv_and_act_elements_tile_their_scratch_rows_once():
    qkv = sorted(ix.qkv_element(L, row, b, r) for row in range(MAX_ROWS) for b in range(L.NG) for r in range(L.QKV_R))
    assert qkv == list(range(MAX_ROWS * L.QKV_N))
    act = sorted(ix.act_element(L, row, b, r) for row in range(MAX_ROWS) for b in range(L.NG) for r in range(L.GU_R))
    assert act == list(range(MAX_ROWS * L.IR))


def test_gathered_rows_and_pairs_are_packed_from_their_region():
    region = 4096
    assert [ix.ag_x8_row(L, region, t) for t in range(MAX_ROWS)] == [
        region + t * (L.model.hidden + 8) for t in range(MAX_ROWS)]
    pairs = [ix.ag_bf_pair(L, region, t, p) for t in range(MAX_ROWS) for p in range(L.ROW_PAIRS)]
    assert pairs == [region + 8 * j for j in range(MAX_ROWS * L.ROW_PAIRS)]


def test_scratch_regions_of_each_layer_follow_the_layer_stride():
    for layer in (0, 1, 3):
        for name, offset in L.W_L_OFF.items():
            assert ix.scratch_at(L, layer, name) == layer * L.W_LAYER_BYTES + offset


def test_attention_partials_and_quarter_scales_are_distinct_and_inside_their_regions():
    per_head = (2 + L.model.head_dim) * 4
    partials = sorted(ix.partial_at(L, 1, b, r, h) for b in range(L.W_NA) for r in range(L.QPR)
                      for h in range(L.model.q_heads))
    start = ix.scratch_at(L, 1, "ap")
    assert partials[0] == start and all(b - a >= per_head for a, b in itertools.pairwise(partials))
    assert partials[-1] + per_head <= start + L.W_NA * L.AP_STRIDE
    assert ix.partial_at(L, 1, 1, 0, 0) == start + L.AP_STRIDE
    assert ix.partial_at(L, 1, 0, 1, 0) == start + L.model.q_heads * per_head
    scales = [ix.a8_scale_at(L, 2, row, q) for row in range(MAX_ROWS) for q in range(4)]
    assert scales == [ix.scratch_at(L, 2, "as") + 4 * j for j in range(4 * MAX_ROWS)]


def test_requests_split_the_attention_blocks_evenly():
    assert [ix.chunks_per_request(L, n) for n in (4, 16, 64)] == [96, 24, 6]
    assert all(isinstance(ix.chunks_per_request(L, n), int) for n in (4, 16, 64))


@pytest.mark.parametrize(("p_first", "lo"), [(0, 0), (5, 0), (4095, 0), (4096, 1), (4196, 101), (9000, 4905)])
def test_the_window_holds_the_last_4096_keys(p_first, lo):
    assert ix.window(L, p_first, p_first + 4) == (lo, p_first + 3, lo // 16, (p_first + 3) // 16)


class _Expr:
    """A stand-in for a traced FlyDSL value: the index functions hand it to FlyDSL's own min/max/select."""

    def select(self, a, b):
        return ("select", a, b)


def test_traced_values_go_to_flydsls_min_max_and_select(monkeypatch):
    import sys
    import types

    fake = types.ModuleType("flydsl.expr")
    fake.min = lambda a, b: ("min", a, b)
    fake.max = lambda a, b: ("max", a, b)
    parent = types.ModuleType("flydsl")
    parent.expr = fake
    monkeypatch.setitem(sys.modules, "flydsl", parent)
    monkeypatch.setitem(sys.modules, "flydsl.expr", fake)
    x = _Expr()
    assert ix.smin(x, 3) == ("min", x, 3) and ix.smin(3, x) == ("min", 3, x)
    assert ix.smax(x, 3) == ("max", x, 3) and ix.smax(3, x) == ("max", 3, x)
    assert (ix.smin(2, 3), ix.smax(2, 3)) == (2, 3)
    assert ix.select(x, 1, 2) == ("select", 1, 2)
    assert (ix.select(True, 1, 2), ix.select(False, 1, 2)) == (1, 2)


def test_reduce_scatter_pairs_are_packed_per_source_and_owned_row():
    """The pairs of columns col0.., written from any column offset, land where the row's pairs from 0 would."""
    region = 1 << 20
    for src, t in itertools.product(range(TP), range(0, MAX_ROWS, 5)):
        base = region + src * L.RS_STRIDE + ix.owner_slot(t) * L.ROW_PAIRS * ix.PAIR_BYTES
        got = [ix.rs_pair(L, region, src, t, col0, p) for col0 in range(0, L.model.hidden, 128) for p in range(64)]
        assert got == [base + j * ix.PAIR_BYTES for j in range(L.ROW_PAIRS)]
        assert all(isinstance(w, int) for w in got)


@pytest.mark.parametrize("qpr", [1, 4, 64])
def test_attention_tiles_and_staged_rows_are_disjoint_and_inside_the_pool(qpr):
    layout = DrafterLayout(qpr=qpr)
    hd, block = layout.model.head_dim, layout.BLOCK
    elements = [ix.tile_k(layout, pair, key, d) for pair in range(2) for key in range(block) for d in range(hd)]
    elements += [ix.tile_v(layout, pair, key, d) for pair in range(2) for key in range(block) for d in range(hd)]
    elements += [ix.staged(layout, i, value, d) for i in range(qpr) for value in range(2) for d in range(hd)]
    assert len(set(elements)) == len(elements) == 4 * block * hd + 2 * qpr * hd
    assert min(elements) == 0 and max(elements) < 2 * layout.pool_words
    # Each lane's MFMA operand is 4 consecutive bf16 at an 8-byte boundary; a fill piece 8 at a 16-byte one.
    assert all(ix.tile_k(layout, p, key, 4 * g) % 4 == 0 for p in range(2) for key in range(block) for g in range(32))
    assert all(ix.tile_v(layout, p, 4 * g, d) % 4 == 0 for p in range(2) for g in range(4) for d in range(hd))
    assert ix.tile_v(layout, 0, 1, 0) == ix.tile_v(layout, 0, 0, 0) + 1  # V transposed: keys adjacent
    assert all(ix.staged(layout, i, v, 8 * j) % 8 == 0 for i in range(qpr) for v in range(2) for j in range(16))


def test_a_block_is_interior_exactly_when_every_row_sees_every_key():
    import random

    rng = random.Random(3)
    for _ in range(3000):
        p_first = rng.randrange(0, 9000)
        qpr = rng.choice([1, 4, 8])
        p_last = p_first + qpr - 1
        lo, hi, b0, b1 = ix.window(L, p_first, p_last + 1 - rng.choice([0, 1]))
        blk = rng.randrange(max(b0 - 1, 0), b1 + 2)
        keys = range(blk * L.BLOCK, (blk + 1) * L.BLOCK)
        every = all(ix.key_seen(L, k, p, lo, hi) for k in keys for p in range(p_first, p_last + 1))
        assert bool(ix.interior(L, blk, p_first, p_last, lo, hi)) == every, (p_first, qpr, lo, hi, blk)


def test_a_row_sees_its_window_up_to_its_own_position():
    assert [k for k in range(0, 40) if ix.key_seen(L, k, 20, 0, 39)] == list(range(0, 21))
    p = 5000
    seen = [k for k in range(0, 6000) if ix.key_seen(L, k, p, 0, 5999)]
    assert seen == list(range(p - L.WINDOW + 1, p + 1))
    assert not ix.key_seen(L, 30, 40, 31, 45) and not ix.key_seen(L, 46, 50, 0, 45)  # outside [lo, hi]
    assert ix.seq_len_at(3) == 12


def test_the_kernel_computes_no_address_outside_indexing():
    """Every offset the kernel's code (``kernel.KERNEL_FILES``) adds to an address comes from an ``ix.`` call
    (a slip in a copy of the arithmetic would show in the kernel and not in the emulation, which calls the same
    functions): the offset of ``dev.at(base, offset)`` is an ``ix.`` call (after the rank's region base
    ``yw``), an LDS index added to ``pool``/``pool16`` is an ``ix.`` call or a helper's parameter, and no
    address (a kernel parameter, read by name or as an attribute) is used in any other arithmetic."""
    import ast

    from kerneltune.kernels.drafter_wide import kernel

    here = Path(kernel.__file__).parent
    trees = {name: ast.parse((here / name).read_text()) for name in kernel.KERNEL_FILES}
    func = next(n for n in ast.walk(trees["kernel.py"]) if isinstance(n, ast.FunctionDef) and n.name == "drafter_wide")
    addresses = {a.arg for a in func.args.args if getattr(a.annotation, "id", "") == "I64"} | {"pool", "pool16"}
    assert len(addresses) == 23

    def name(node: ast.AST) -> str:
        """``x`` of ``x``, ``a.x`` or ``self.args.x``."""
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""

    def is_ix(node: ast.AST) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "ix")

    def offset_ok(node: ast.AST) -> bool:
        if is_ix(node):
            return True
        return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and name(node.left) == "yw"
                and is_ix(node.right))

    bad, ats = [], 0
    for file, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "at"
                    and getattr(node.func.value, "id", "") == "dev"):
                ats += 1
                if not offset_ok(node.args[1]):
                    bad.append(f"{file}:{node.lineno}: dev.at offset {ast.unparse(node.args[1])}")
            if isinstance(node, ast.BinOp) and any(name(x) in addresses for x in (node.left, node.right)):
                lds = (isinstance(node.op, ast.Add) and name(node.left) in ("pool", "pool16")
                       and (is_ix(node.right) or isinstance(node.right, ast.Name)))
                if not lds:
                    bad.append(f"{file}:{node.lineno}: {ast.unparse(node)}")
    assert ats > 50, f"only {ats} dev.at calls: the kernel's files moved?"
    assert not bad, "\n".join(bad)
