"""A FlyDSL kernel that runs the megakernel's hand-written conversions (``device.bf16_bits``, ``bf16_pair``,
``bf16_value``, ``tagged_word``) on an input buffer, one value a thread and pass: captured and run by the CPU
interpreter, its outputs are checked bit for bit against ml_dtypes' bfloat16 on the edge values (ties, the largest
and smallest normals, subnormals, inf, NaN: ``tests/kernels/drafter_wide/test_conversions.py``). The kernel's own
code, not a copy of it: the probe traces the functions the roles call."""

# No ``from __future__ import annotations``: FlyDSL reads the kernel parameters' annotations as types (strings
# of names local to the builder would make them i32).

THREADS = 256
PASSES = 4  # values a thread: THREADS * PASSES inputs a launch
ARG_SPEC = [["i64", None]] * 5 + [["i32", None]]  # x, back (float32), bits, pairs (int32), words (int64); tag


def build_conversion_probe():
    """The ``@flyc.jit`` launcher: for value ``i = tid * PASSES + k``, ``bits[i] = bf16_bits(x[i])``,
    ``pairs[i] = bf16_pair(x[i], x[i ^ 1])``, ``words[i] = tagged_word(pairs[i], tag)`` and
    ``back[i] = bf16_value(bits[i])`` (the round trip)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import range_constexpr

    from . import device as dev

    I32, I64, F32 = fx.Int32, fx.Int64, fx.Float32

    @flyc.kernel(name="drafter_conversion_probe", known_block_size=[THREADS, 1, 1])
    def probe(x: I64, back: I64, bits: I64, pairs: I64, words: I64, tag: I32):
        tid = I32(fx.thread_idx.x)
        for k in range_constexpr(PASSES):
            i = tid * PASSES + k
            v = dev.ld(dev.at(x, 4 * i), F32)
            other = dev.ld(dev.at(x, 4 * (i ^ 1)), F32)
            b = dev.bf16_bits(v)
            pair = dev.bf16_pair(v, other)
            dev.st(dev.at(bits, 4 * i), b, I32)
            dev.st(dev.at(pairs, 4 * i), pair, I32)
            dev.st(dev.at(words, 8 * i), dev.tagged_word(pair, tag), I64, 8)
            dev.st(dev.at(back, 4 * i), dev.bf16_value(b), F32)

    @flyc.jit
    def launch(x: I64, back: I64, bits: I64, pairs: I64, words: I64, tag: I32,
               stream: fx.Stream = fx.Stream(None)):  # noqa: B008
        probe(x, back, bits, pairs, words, tag).launch(grid=(1, 1, 1), block=(THREADS, 1, 1), stream=stream)

    return launch
