"""Every conversion the drafter does by hand, bit for bit against a library on its edge values (issue 98): ties,
the largest and smallest normals, subnormals, inf, NaN.

- the kernel's own bf16 rounding and packing (``device.bf16_bits``, ``bf16_pair``, ``bf16_value``,
  ``tagged_word``), traced into a probe kernel (``conversion_probe``) and run by the interpreter, against
  ml_dtypes' bfloat16;
- the 8-bit codes the kernel packs (``Block.f8_pair``/``f8_word`` call ``v_cvt_pk_fp8_f32``: the interpreter's
  ``fp8.encode``) and the interpreter's decode table, against ml_dtypes' and torch's e4m3fn / e4m3fnuz;
- the interpreter's own bf16 (``ops.bf16_bits``, ``bf16_value``: FlyDSL's ``truncf``/``extf``), against ml_dtypes.
"""

from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter import fp8
from kerneltune.kernels.drafter_wide.interpreter.ops import bf16_bits, bf16_value


def _f32(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


# bf16 keeps the top 16 bits of a float32: a tie is a low half of exactly 0x8000
BF16_EDGES = _f32(
    0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000,  # ties: to the even bf16 (down, then up), both signs
    0x3F807FFF, 0x3F808001, 0x3F817FFF, 0x3F818001,  # a hair either side of a tie
    0x7F7F0000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF,  # the largest bf16 normal; float32's, to inf
    0x00800000, 0x80800000, 0x00808000, 0x00818000,  # the smallest normal, and ties there
    0x007FFFFF, 0x00400000, 0x00008000, 0x00018000, 0x00000001, 0x80000001,  # subnormals: to the smallest normal,
    0x00000000, 0x80000000,  # halves, ties to 0 and 2, the least; both zeros
    0x7F800000, 0xFF800000,  # infinities
)
# NaNs whose payload reaches bf16's 7 mantissa bits (the kernel's NaNs are the quiet 0x7FC00000 of its arithmetic)
BF16_NANS = _f32(0x7FC00000, 0xFFC00000, 0x7FA00000, 0x7FFFFFFF)


def _probe_inputs() -> np.ndarray:
    from kerneltune.kernels.drafter_wide.conversion_probe import PASSES, THREADS

    rng = np.random.default_rng(98)
    n = THREADS * PASSES
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)  # every class of float32
    x = np.where(np.isnan(x), np.float32(1.5), x)  # random NaNs: their payloads are the departure tested apart
    edges = np.concatenate([BF16_EDGES, BF16_NANS])
    x[:edges.size] = edges
    x[edges.size:2 * edges.size] = edges[::-1]  # each edge in the other half of a pair too
    return x


@pytest.fixture(scope="module")
def probe():
    from kerneltune.kernels.drafter_wide import conversion_probe
    from kerneltune.kernels.drafter_wide.conversion_probe import ARG_SPEC
    from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
    from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
    from kerneltune.kernels.drafter_wide.interpreter.program import Program, capture
    from kerneltune.tables.stamps import source_hash

    here = Path(conversion_probe.__file__).parent
    cache = Path(os.environ["KERNELTUNE_CACHE"]) / "interpret"
    text = capture("kerneltune.kernels.drafter_wide.conversion_probe:build_conversion_probe", {}, ARG_SPEC,
                   "gfx942", cache, source_hash(here / f for f in ("conversion_probe.py", "device.py")))
    x = _probe_inputs()
    n = x.size
    out = {"x": x.copy(), "back": np.zeros(n, np.float32), "bits": np.zeros(n, np.int32),
           "pairs": np.zeros(n, np.int32), "words": np.zeros(n, np.int64)}
    mem = GlobalMemory()
    addrs = [mem.allocate(k, v) for k, v in out.items()]
    Launch(Program(text, cache=cache), mem, "gfx942").run([Grid([*addrs, 98], 1)])
    return x, out


def _want_bits(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN inputs: compared apart
        return x.astype(ml_dtypes.bfloat16).view(np.uint16)


def test_the_kernels_bf16_rounding_is_ml_dtypes_bit_for_bit(probe):
    x, out = probe
    got, want = out["bits"].view(np.uint32), _want_bits(x).astype(np.uint32)
    finite = ~np.isnan(x)
    bad = np.nonzero((got != want) & finite)[0]
    assert not bad.size, [(hex(int(x.view(np.uint32)[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]
    assert (got[:BF16_EDGES.size] == want[:BF16_EDGES.size]).all()  # the edges themselves, named
    quiet = np.isin(x.view(np.uint32), [0x7FC00000, 0xFFC00000, 0x7FA00000])
    assert quiet.sum() >= 6 and np.isnan(bf16_value(got[quiet].astype(np.uint16))).all()  # the quiet NaNs stay NaN
    assert not (got >> 16).any()  # the bits sit in the low half, the rest zero


@pytest.mark.xfail(strict=True, reason="found 2026-12-07 (issue 98), not fixed here: device.bf16_bits rounds finite "
                   "values (its docstring), and a NaN whose payload carries into the sign (0x7FFFFFFF) becomes -0.0, "
                   "one with only low payload bits (0x7F800001) inf: a NaN of the step's inputs (x_in) would vanish "
                   "there. Fixing it changes the kernel's programs: it waits for its own change")
def test_every_nan_stays_a_nan_in_the_kernels_bf16_rounding(probe):
    x, out = probe
    nan = np.isnan(x)
    assert np.isnan(bf16_value(out["bits"][nan].astype(np.uint16))).all()


def test_the_kernels_pairs_words_and_widening_are_ml_dtypes_bit_for_bit(probe):
    x, out = probe
    n = x.size
    partner = x[np.arange(n) ^ 1]
    want = _want_bits(x).astype(np.uint32) | (_want_bits(partner).astype(np.uint32) << 16)
    ok = ~(np.isnan(x) | np.isnan(partner))
    np.testing.assert_array_equal(out["pairs"].view(np.uint32)[ok], want[ok])
    np.testing.assert_array_equal(out["words"].view(np.uint64), (np.uint64(98) << np.uint64(32))
                                  | out["pairs"].view(np.uint32).astype(np.uint64))
    back = _want_bits(x).view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(out["back"].view(np.uint32)[~np.isnan(x)], back.view(np.uint32)[~np.isnan(x)])


def test_the_kernels_rounding_is_of_finite_values_a_nan_with_only_low_payload_bits_is_its_documented_departure():
    """``device.bf16_bits`` rounds finite values (its docstring): the quiet NaNs its arithmetic makes stay NaN, but
    a NaN whose payload lies in the 16 bits it drops would round to inf. Its formula, on integers, shows both."""
    def formula(b: int) -> int:
        return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFFFFFF) >> 16
    assert formula(0x7FC00000) == 0x7FC0 and formula(0xFFC00000) == 0xFFC0
    assert formula(0x7F800001) == 0x7F80  # inf: no such NaN arises in the kernel


def test_the_interpreters_bf16_is_ml_dtypes_bit_for_bit():
    rng = np.random.default_rng(7)
    x = np.concatenate([BF16_EDGES, rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)])
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(bf16_bits(x)[finite], _want_bits(x)[finite])
    assert (bf16_bits(np.concatenate([BF16_NANS, x[~finite]])) == 0x7FC0).all()  # NaN: the quiet NaN
    every = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    np.testing.assert_array_equal(bf16_value(every).view(np.uint32),
                                  every.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32))


F8_NAMES = {"gfx942": ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 240.0, 2.0 ** -7),
            "gfx950": ("e4m3fn", ml_dtypes.float8_e4m3fn, 448.0, 2.0 ** -6)}


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_8_bit_decode_table_is_ml_dtypes_for_every_code(arch):
    fmt, dtype, _, _ = F8_NAMES[arch]
    want = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    got = fp8.decode_table(fmt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)].view(np.uint32), want[~np.isnan(want)].view(np.uint32))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_8_bit_codes_on_their_edges_are_torchs_and_ml_dtypes(arch):
    """Ties between neighbouring codes (to even), the largest normal and just past it (e4m3fn saturates, as the
    hardware's cvt and torch's cast do), the smallest normal, the subnormals and their ties, zeros, inf, NaN."""
    fmt, dtype, top, least_normal = F8_NAMES[arch]
    sub = least_normal / 8  # the subnormals' step
    edges = np.array([top, -top, top * 1.03, top * 1.0625, np.inf, -np.inf, np.nan, 0.0, -0.0, least_normal,
                      -least_normal, least_normal * (1 + 1 / 16), least_normal * (1 + 3 / 16), sub, sub / 2,
                      sub * 1.5, sub * 2.5, sub * 0.49, least_normal - sub / 2, 1.0625, 1.1875, -1.0625], np.float32)
    got, want = fp8.encode(edges, arch), fp8.encode_torch(edges, arch)
    np.testing.assert_array_equal(got, want)
    finite = np.isfinite(edges) & (np.abs(edges) <= top)
    np.testing.assert_array_equal(got[finite], edges[finite].astype(dtype).view(np.uint8))
    if fmt == "e4m3fn":  # saturating, where a plain cast overflows to NaN
        assert fp8.decode(got[2:4], arch).tolist() == [top, top]
    assert np.isnan(fp8.decode(got[6:7], arch)).all()


def test_the_packed_8_bit_word_holds_each_code_in_its_byte():
    """``v_cvt_pk_fp8_f32`` as the interpreter runs it: a word's low or high 16 bits (word select) get the two
    codes, the first in the lower byte, the other half of the old word kept."""
    from kerneltune.kernels.drafter_wide.interpreter.ops import _cvt_pk_fp8

    class Op:
        args, res, attrs = (0, 1, 2), (3,), {}

    class Task:
        class launch:
            arch = "gfx950"
    a, b = np.array([1.0, -448.0], np.float32), np.array([0.0625, 3.0], np.float32)
    old = np.array([0x11223344, 0x55667788], np.uint32).view(np.int32)
    codes_a, codes_b = fp8.encode(a, "gfx950").astype(np.uint32), fp8.encode(b, "gfx950").astype(np.uint32)
    for high in (False, True):
        op = Op()
        op.attrs = {"wordSel": high}
        env = [a, b, old, None]
        _cvt_pk_fp8(op)(Task(), env, None)
        pair = codes_a | (codes_b << 8)
        want = (old.view(np.uint32) & 0xFFFF) | (pair << 16) if high else (old.view(np.uint32) & 0xFFFF0000) | pair
        np.testing.assert_array_equal(env[3].view(np.uint32), want)
