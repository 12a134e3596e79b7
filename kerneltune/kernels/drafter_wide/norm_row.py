"""The drafter's row RMSNorm stage (the N blocks' work): one bf16 hidden row per block.

x_out = x * rsqrt(mean(x^2) + eps) * w, accumulated in f32, with the widest buffer load
(8, 4 or 2 bf16) that splits the row evenly over the threads; the cross-wave sum goes
through the block's LDS pool, declared at the drafter layout's full size so the compiled
LDS use is the pool's.
"""


import math

WAVE = 64
EPS = 1e-6


def vector_width(hidden: int, threads: int) -> int:
    """bf16 per load: the widest of 8, 4, 2 that splits the row evenly over the threads."""
    for vec in (8, 4, 2):
        if hidden % (threads * vec) == 0:
            return vec
    raise ValueError(f"hidden {hidden} does not split over {threads} threads in loads of 2, 4 or 8 bf16")


def build_norm_row(hidden: int, threads: int, pool_words: int):
    """The ``@flyc.jit`` launcher of the row norm for rows of ``hidden`` bf16."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import arith, gpu, range_constexpr
    from flydsl.expr import math as fmath
    from flydsl.expr.typing import ReductionOp

    vec = vector_width(hidden, threads)
    copy = {8: fx.rocdl.BufferCopy128b, 4: fx.rocdl.BufferCopy64b, 2: fx.rocdl.BufferCopy32b}[vec]
    waves = threads // WAVE
    if pool_words < waves:
        raise ValueError(f"pool_words {pool_words} cannot hold {waves} partial sums")
    tiles = hidden // (threads * vec)

    @fx.struct
    class Pool:
        words: fx.Array[fx.Float32, pool_words, 16]

    @flyc.kernel(known_block_size=[threads, 1, 1])
    def drafter_norm_row(x: fx.Tensor, w: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x
        tid = fx.thread_idx.x
        lane = tid % WAVE
        wave = tid // WAVE
        fast = arith.FastMathFlags.fast
        pool = fx.SharedAllocator().allocate(Pool).peek().words.view(fx.make_layout(pool_words, 1))

        x_row = fx.logical_divide(fx.slice(fx.rocdl.make_buffer_tensor(x), (row, None)), fx.make_layout(vec, 1))
        o_row = fx.logical_divide(fx.slice(fx.rocdl.make_buffer_tensor(out), (row, None)), fx.make_layout(vec, 1))
        w_all = fx.logical_divide(fx.rocdl.make_buffer_tensor(w), fx.make_layout(vec, 1))
        atom = fx.make_copy_atom(copy(), 16)

        def load(view, i):
            r = fx.make_rmem_tensor(vec, fx.BFloat16)
            fx.copy(atom, fx.slice(view, (None, i)), r)
            return fx.memref_load_vec(r)

        def wave_sum(v):
            for k in range_constexpr(int(math.log2(WAVE))):
                v = v.addf(v.shuffle_xor(WAVE >> (k + 1), WAVE), fastmath=fast)
            return v

        xs = []
        acc = fx.Float32(0.0)
        for t in range_constexpr(tiles):
            v = load(x_row, tid + t * threads)
            xs.append(v)
            f = v.to(fx.Float32)
            acc = acc + (f * f).reduce(ReductionOp.ADD, fastmath=fast)
        acc = wave_sum(acc)
        if lane == 0:
            fx.memref_store(acc, pool, wave)
        gpu.barrier()
        total = fx.Float32(0.0)
        for k in range_constexpr(waves):
            total = total + fx.memref_load(pool, k)
        rstd = fmath.rsqrt(total / float(hidden) + EPS, fastmath=fast)
        for t in range_constexpr(tiles):
            i = tid + t * threads
            y = xs[t].to(fx.Float32) * rstd * load(w_all, i).to(fx.Float32)
            r = fx.make_rmem_tensor(vec, fx.BFloat16)
            fx.memref_store_vec(y.to(fx.BFloat16), r)
            fx.copy(atom, r, fx.slice(o_row, (None, i)))

    @flyc.jit
    def launch(x: fx.Tensor, w: fx.Tensor, out: fx.Tensor, stream: fx.Stream = fx.Stream(None)):  # noqa: B008
        rows = x.shape.unpack()[0]
        drafter_norm_row(x, w, out).launch(grid=(rows, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch
