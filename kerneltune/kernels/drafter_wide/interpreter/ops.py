"""What each op does to arrays of lanes: ``bind`` gives every ``Op`` of a program its ``run``.

A value is a NumPy array, lanes first: shape ``(lanes, ...)``, or ``(1, ...)`` for a value every lane
holds alike (block ids, constants and what is computed from them only), which NumPy broadcasts. ``mask``
is None (every lane active) or a bool array of the block's lanes: inside divergent ``scf.if`` and
``scf.while`` only active lanes load, store and take part in atomics; arithmetic runs on every lane.
Ops that may let another block run (a ``scf.while`` iteration: every poll loop; a release store: a
publish) are generators that yield to the scheduler; everything else runs straight through. An
iteration whose carried values did not change is a ``poll`` (spinning); one that changed them a ``step``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import fp8, mfma
from .ir import TERMINATORS, Op, Region, UnknownOp
from .memory import MemoryFault
from .races import BarrierDivergence, lds_read, lds_write
from .types import VType, parse_type
from .weak_memory import scope_of

DYNAMIC_64 = -(2 ** 63)  # a dynamic position in vector ops
DYNAMIC_32 = -(2 ** 31)  # a dynamic index in llvm.getelementptr
_UNSIGNED = {np.int8: np.uint8, np.int16: np.uint16, np.int32: np.uint32, np.int64: np.uint64}
_CMPI = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
         6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}


def _cmpf(pred: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    ordered = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal, 6: np.not_equal}
    if pred == 0:
        return lambda a, b: np.zeros(np.broadcast(a, b).shape, bool)
    if pred == 15:
        return lambda a, b: np.ones(np.broadcast(a, b).shape, bool)
    if pred == 7:
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if pred == 14:
        return lambda a, b: np.isnan(a) | np.isnan(b)
    if pred in ordered:
        f = ordered[pred]
        return lambda a, b: f(a, b) & ~(np.isnan(a) | np.isnan(b))
    f = ordered[pred - 7]
    return lambda a, b: f(a, b) | np.isnan(a) | np.isnan(b)


def _unsigned(a: np.ndarray) -> np.ndarray:
    return a.view(_UNSIGNED[a.dtype.type]) if a.dtype.type in _UNSIGNED else a


def where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-lane choice between two values of any shape (``c``: one bool per lane)."""
    nd = max(a.ndim, b.ndim)
    return np.where(c.reshape(c.shape + (1,) * (nd - c.ndim)), a, b)


def lanes(x: np.ndarray, n: int) -> np.ndarray:
    return x if x.shape[0] == n else np.broadcast_to(x, (n, *x.shape[1:]))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even; NaN stays a quiet NaN."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


# ------------------------------------------------------------------------------------------- factories
def _pure(op: Op, fn: Callable[..., np.ndarray]) -> Callable[..., None]:
    r = op.res[0]
    if len(op.args) == 1:
        (x,) = op.args

        def run1(task: Any, env: list, mask: Any) -> None:
            env[r] = fn(env[x])
        return run1
    if len(op.args) == 2:
        x, y = op.args

        def run2(task: Any, env: list, mask: Any) -> None:
            env[r] = fn(env[x], env[y])
        return run2
    args = op.args

    def run(task: Any, env: list, mask: Any) -> None:
        env[r] = fn(*[env[i] for i in args])
    return run


def _constant(op: Op) -> np.ndarray:
    t = op.res_types[0]
    v = op.attrs["value"]
    if isinstance(v, tuple):
        kind, data = v
        arr = np.full(t.shape, data) if kind == "splat" else np.asarray(data).reshape(t.shape)
    else:
        arr = np.asarray(v)
    if t.kind == "bf16":
        return bf16_bits(np.asarray(arr, np.float32))[None]
    return np.asarray(arr, dtype=t.dtype).reshape((1, *t.shape))


def _int_op(op: Op) -> Callable[..., np.ndarray]:
    name = op.name.split(".", 1)[1]
    t = op.res_types[0].dtype if op.res_types else None

    def shrui(a: np.ndarray, s: np.ndarray) -> np.ndarray:
        ua = _unsigned(a)
        return (ua >> s.astype(ua.dtype)).view(a.dtype)

    def divsi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        b = np.where(b == 0, 1, b)
        return (a - np.fmod(a, b)) // b

    table: dict[str, Callable[..., np.ndarray]] = {
        "addi": np.add, "subi": np.subtract, "muli": np.multiply, "andi": np.bitwise_and, "ori": np.bitwise_or,
        "xori": np.bitwise_xor, "maxsi": np.maximum, "minsi": np.minimum,
        "maxui": lambda a, b: np.maximum(_unsigned(a), _unsigned(b)).view(a.dtype),
        "minui": lambda a, b: np.minimum(_unsigned(a), _unsigned(b)).view(a.dtype),
        "shli": lambda a, s: np.left_shift(a, s.astype(a.dtype)), "shrui": shrui,
        "shrsi": lambda a, s: np.right_shift(a, s.astype(a.dtype)),
        "floordivsi": lambda a, b: np.floor_divide(a, np.where(b == 0, 1, b)),
        "remsi": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)), "divsi": divsi,
        "divui": lambda a, b: (_unsigned(a) // np.where(b == 0, 1, _unsigned(b))).view(a.dtype),
        "remui": lambda a, b: (_unsigned(a) % np.where(b == 0, 1, _unsigned(b))).view(a.dtype),
    }
    if name in table:
        return table[name]
    if name == "cmpi":
        pred = op.attrs["predicate"]
        f = _CMPI[pred]
        return (lambda a, b: f(_unsigned(a), _unsigned(b))) if pred >= 6 else f
    if name == "extsi":
        return (lambda a: -(a.astype(t))) if op.arg_types[0].dtype is np.bool_ else (lambda a: a.astype(t))
    if name == "extui":
        return lambda a: (a if a.dtype == np.bool_ else _unsigned(a)).astype(t)
    if name == "trunci":
        return (lambda a: (a & 1).astype(bool)) if t is np.bool_ else (lambda a: a.astype(t))
    if name == "index_cast" or name == "index_castui":
        return lambda a: a.astype(t)
    if name == "select":
        return where
    raise KeyError(name)


def _float_op(op: Op) -> Callable[..., np.ndarray]:
    name = op.name
    src = op.arg_types[0] if op.arg_types else None
    dst = op.res_types[0] if op.res_types else None
    table: dict[str, Callable[..., np.ndarray]] = {
        "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
        "arith.negf": np.negative, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
        "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin, "arith.remf": np.fmod, "math.absf": np.abs,
        "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.sqrt": np.sqrt,
        "math.rsqrt": lambda a: (np.float32(1) / np.sqrt(a)).astype(a.dtype),
        "math.fma": lambda a, b, c: (a.astype(np.float64) * b + c).astype(a.dtype),
        "math.tanh": np.tanh,
    }
    if name in table:
        return table[name]
    if name == "arith.cmpf":
        return _cmpf(op.attrs["predicate"])
    if name == "arith.extf":
        if src.kind == "bf16":
            return bf16_value
        return lambda a: a.astype(dst.dtype)
    if name == "arith.truncf":
        if dst.kind == "bf16":
            return bf16_bits
        return lambda a: a.astype(dst.dtype)
    if name == "arith.sitofp":
        return lambda a: a.astype(dst.dtype)
    if name == "arith.uitofp":
        return lambda a: _unsigned(a).astype(dst.dtype)
    if name == "arith.fptosi":
        return lambda a: np.trunc(a).astype(dst.dtype)
    if name == "arith.bitcast":
        return lambda a: np.ascontiguousarray(a).view(dst.dtype)
    raise KeyError(name)


def _vector_op(op: Op) -> Callable[..., np.ndarray]:
    name = op.name
    dst = op.res_types[0]
    if name == "vector.extract":
        pos = op.attrs.get("static_position", [])
        if len(pos) != 1 or pos[0] == DYNAMIC_64:
            raise KeyError(f"{name} at positions {pos}")
        p = pos[0]
        return lambda a: a[:, p]
    if name == "vector.insert":
        pos = op.attrs.get("static_position", [])
        if len(pos) != 1 or pos[0] == DYNAMIC_64:
            raise KeyError(f"{name} at positions {pos}")
        p = pos[0]

        def insert(v: np.ndarray, vec: np.ndarray) -> np.ndarray:
            n = max(v.shape[0], vec.shape[0])
            out = np.array(lanes(vec, n))
            out[:, p] = lanes(v, n)
            return out
        return insert
    if name in ("vector.broadcast", "vector.splat"):
        n = dst.shape[0]
        return lambda a: np.repeat(a.reshape(a.shape[0], 1), n, axis=1) if a.ndim == 1 else a
    if name == "vector.bitcast":
        return lambda a: np.ascontiguousarray(a).view(dst.dtype).reshape((a.shape[0], *dst.shape))

    if name == "vector.from_elements":
        def stack(*xs: np.ndarray) -> np.ndarray:
            n = max(x.shape[0] for x in xs)
            return np.stack([lanes(x, n) for x in xs], axis=1)
        return stack
    raise KeyError(name)


# ------------------------------------------------------------------------------------------- memory
def _space_of(t: VType, op: Op) -> int:
    if t.space not in (0, 1, 3):
        raise UnknownOp(f"{op.name} at {op.where}: address space {t.space}")
    return t.space


def _memory(task: Any, space: int) -> Any:
    return task.lds if space == 3 else task.memory


def _active_addresses(p: np.ndarray, mask: Any, align: int, op: Op) -> tuple[np.ndarray, Any]:
    """The addresses of the active lanes and the lanes they belong to (None: all of ``p``)."""
    if mask is not None and p.shape[0] != 1:
        p, sel = p[mask], mask
    else:
        sel = None
    if align > 1 and p.size and (p % align).any():
        bad = int(p[np.nonzero(p % align)[0][0]])
        raise MemoryFault(f"{op.name} at {op.where}: address 0x{bad:x} is not {align}-byte aligned as the op says")
    return p, sel


def _lds_of_batch(task: Any, p: np.ndarray, mask: Any, nbytes: int, op: Op) -> np.ndarray:
    """A batch's LDS addresses: each lane's offset in its block's LDS (checked against that block's bytes, as
    ``SharedMemory`` checks one block's) moved to where its block's LDS lies in the batch's."""
    on = lanes(p, task.lanes) if mask is None else lanes(p, task.lanes)[mask]
    bad = np.nonzero((on < 0) | (on + nbytes > task.lds_block))[0]
    if bad.size:
        raise MemoryFault(f"{op.name} at {op.where}: a {nbytes}-byte LDS access at offset {int(on[bad[0]])} leaves "
                          f"the block's {task.lds_block} bytes (lane {int(bad[0]) % task.threads})")
    return p + task.lds_base


def _site(program: Any, op: Op) -> int:
    """The op's index in ``program.sites`` (what a race report names)."""
    program.sites.append(f"{op.name} at {op.where}")
    return len(program.sites) - 1


def _lane_waves(task: Any, uniform: bool, mask: Any, sel: Any, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each access's address and wave: a lane's own, or one for each wave with an active lane where every lane
    uses one address (``uniform``)."""
    if uniform:
        waves = np.nonzero(task.active_waves(mask))[0]
        return np.repeat(addrs[:1], waves.size), waves
    if sel is None:
        return addrs, lanes(task.wave_of_lane, addrs.size) if addrs.size != task.lanes else task.wave_of_lane
    return addrs, task.wave_of_lane[sel]


def _ordering(op: Op) -> tuple[int, int]:
    return int(op.attrs.get("ordering", 0) or 0), scope_of(op.attrs.get("syncscope"))


def _load(op: Op, program: Any) -> Callable[..., None]:
    (pslot,) = op.args
    (r,) = op.res
    t = op.res_types[0]
    space = _space_of(op.arg_types[0], op)
    align = int(op.attrs.get("alignment", 1) or 1)
    nbytes = t.nbytes
    shape = t.shape
    plain = space != 3 and not op.attrs.get("ordering", 0)  # an atomic load reads memory, never a held line
    site = _site(program, op)
    order, scope = _ordering(op)

    def run(task: Any, env: list, mask: Any) -> None:
        p = env[pslot]
        if mask is not None and p.shape[0] == 1 and not mask.any():
            env[r] = np.zeros((1, *shape), t.dtype)
            return
        if space == 3 and task.blocks > 1:
            p = _lds_of_batch(task, p, mask, nbytes, op)
        addrs, sel = _active_addresses(p, mask, align, op)
        where = f"{op.name} at {op.where}"
        launch = task.launch
        groups = None
        if not addrs.size:
            raw = np.zeros((0, nbytes), np.uint8)
        elif plain and task.memory.owned:
            groups = task.memory._locate(addrs, nbytes, where)
            raw = task.memory.load_plain(addrs, nbytes, where, task.rank, launch.held_lines(task.rank), groups)
        else:
            raw = _memory(task, space).load(addrs, nbytes, where)
        if addrs.size:
            if space == 3:
                if launch.races:
                    lds_read(task, *_lane_waves(task, p.shape[0] == 1, mask, sel, addrs), nbytes, site)
            elif launch.weak is not None:
                one = groups is not None and len(groups) == 1 and groups[0][1] is None  # every lane in one
                a, w = _lane_waves(task, p.shape[0] == 1, mask, sel, addrs)
                if task.blocks > 1 and order == 0:  # a batch's plain load: its blocks checked at once
                    k = w // task.block_waves
                    launch.weak.load(task, a, w - k * task.block_waves, nbytes, site, False, order, scope,
                                     groups if one else None, task.gb_of[k])
                else:
                    for block, ab, wb in task.per_block(a, w):
                        launch.weak.load(block, ab, wb, nbytes, site, order != 0, order, scope,
                                         groups if one else None)
        vals = np.ascontiguousarray(raw).view(t.dtype).reshape((addrs.size, *shape))
        if sel is None:
            env[r] = vals
        else:
            full = np.zeros((sel.size, *shape), t.dtype)
            full[sel] = vals
            env[r] = full
    return run


def _store(op: Op, program: Any) -> Callable[..., Any]:
    vslot, pslot = op.args
    t = op.arg_types[0]
    space = _space_of(op.arg_types[1], op)
    align = int(op.attrs.get("alignment", 1) or 1)
    nbytes = t.nbytes
    site = _site(program, op)
    order, scope = _ordering(op)

    def store(task: Any, env: list, mask: Any) -> None:
        v, p = env[vslot], env[pslot]
        n = max(v.shape[0], p.shape[0])
        if n == 1:
            if mask is not None and not mask.any():
                return
        else:
            v, p = lanes(v, n), lanes(p, n)
        if space == 3 and task.blocks > 1:
            p = _lds_of_batch(task, p, mask, nbytes, op)
            v, n = lanes(v, task.lanes), task.lanes
        addrs, sel = _active_addresses(p, mask if n > 1 else None, align, op)
        if sel is not None:
            v = v[sel]
        if not addrs.size:
            return
        raw = np.ascontiguousarray(v, dtype=t.dtype).view(np.uint8).reshape(addrs.size, nbytes)
        launch = task.launch
        _memory(task, space).store(addrs, raw, f"{op.name} at {op.where}")  # a stray address faults first
        if space == 3 and launch.races:
            lds_write(task, *_lane_waves(task, n == 1, mask, sel, addrs), nbytes, site)
        if space != 3 and launch.weak is not None:
            for block, a, w in task.per_block(*_lane_waves(task, n == 1, mask, sel, addrs)):
                launch.weak.store(block, a, w, nbytes, site, order != 0, order, scope)

    if op.attrs.get("ordering", 0) in (5, 6, 7) and space != 3:  # a release store: a publish
        def publish(task: Any, env: list, mask: Any) -> Iterator[Any]:
            store(task, env, mask)
            yield ("publish", op)
        op.generator = True
        return publish
    return store


def _cmpxchg(op: Op, program: Any) -> Callable[..., None]:
    pslot, cslot, nslot = op.args
    (r,) = op.res
    t = op.arg_types[1]
    space = _space_of(op.arg_types[0], op)
    where_ = f"{op.name} at {op.where}"
    site = _site(program, op)
    scope = scope_of(op.attrs.get("syncscope"))
    success, failure = int(op.attrs.get("success_ordering", 2) or 2), int(op.attrs.get("failure_ordering", 2) or 2)

    def run(task: Any, env: list, mask: Any) -> None:
        p, c, new = env[pslot], env[cslot], env[nslot]
        n = max(p.shape[0], c.shape[0], new.shape[0], 1 if mask is None else mask.size)
        p, c, new = lanes(p, n), lanes(c, n), lanes(new, n)
        old = np.zeros(n, t.dtype)
        ok = np.zeros(n, bool)
        mem = _memory(task, space)
        if space == 3 and task.blocks > 1:
            p, n = _lds_of_batch(task, p, mask, t.nbytes, op), task.lanes
            c, new = lanes(c, n), lanes(new, n)
        for lane in range(n) if mask is None else np.nonzero(lanes(mask, n))[0]:
            a = p[lane:lane + 1]
            if a[0] % t.nbytes:
                raise MemoryFault(f"{where_}: address 0x{int(a[0]):x} is not {t.nbytes}-byte aligned")
            cur = mem.load(a, t.nbytes, where_).view(t.dtype)[0, 0]
            old[lane] = cur
            weak = task.launch.weak if space != 3 else None
            block, _, wave = next(task.per_block(a, task.wave_of_lane[lane:lane + 1]))
            if weak is not None:
                weak.load(block, a, wave, t.nbytes, site, True, success if cur == c[lane] else failure, scope)
            if cur == c[lane]:
                ok[lane] = True
                mem.store(a, np.asarray([new[lane]], t.dtype).view(np.uint8).reshape(1, t.nbytes), where_)
                if weak is not None:
                    weak.store(block, a, wave, t.nbytes, site, True, success, scope)
        env[r] = (old, ok)
    return run


def _gep(op: Op) -> Callable[..., np.ndarray]:
    raw = op.attrs.get("rawConstantIndices", [])
    elem = parse_type(str(op.attrs["elem_type"]))
    if len(raw) != 1:
        raise KeyError(f"llvm.getelementptr with {len(raw)} indices")
    size = elem.nbytes
    if raw[0] == DYNAMIC_32:
        return lambda base, idx: base + idx.astype(np.int64) * size
    offset = raw[0] * size
    return lambda base: base + offset


# ------------------------------------------------------------------------------------------- GPU
def _shuffle(op: Op) -> Callable[..., None]:
    xs, offs, widths = op.args
    r, valid = op.res
    mode = str(op.attrs["mode"])

    def run(task: Any, env: list, mask: Any) -> None:
        x, off, width = env[xs], env[offs], env[widths]
        if x.shape[0] == 1:
            env[r], env[valid] = x, np.ones(1, bool)
            return
        lane = task.lane  # a batch's lanes in a row: a wave's are its block's
        w = width.astype(np.int64)
        base, pos = lane - lane % w, lane % w
        off = off.astype(np.int64)
        if "xor" in mode:
            src = pos ^ off
        elif "idx" in mode:
            src = off + 0 * pos
        elif "down" in mode:
            src = pos + off
        else:
            src = pos - off
        ok = (src >= 0) & (src < w)
        src = np.where(ok, base + src, lane)
        env[r], env[valid] = x[src], ok
    return run


def _intrinsic(op: Op) -> Callable[..., None]:
    name = op.attrs.get("intrin", "")
    (r,) = op.res
    if name in ("llvm.amdgcn.s.memrealtime", "llvm.amdgcn.s.memtime"):
        def run(task: Any, env: list, mask: Any) -> None:
            env[r] = np.array([task.launch.tick()], np.int64)
        return run
    raise KeyError(f"llvm.call_intrinsic {name}")


def _mfma(op: Op) -> Callable[..., None]:
    a_, b_, c_ = op.args
    (r,) = op.res
    if any(op.attrs.get(k, 0) not in (0, "#rocdl<mfma_perm_b none>") for k in ("cbsz", "abid", "blgp")):
        raise KeyError(f"{op.name} with broadcast or permute controls {op.attrs}")
    if op.name not in ("rocdl.mfma.f32.16x16x32.fp8.fp8", "rocdl.mfma.f32.16x16x16bf16.1k"):
        raise KeyError(op.name)
    fp8_ = "fp8" in op.name

    def run(task: Any, env: list, mask: Any) -> None:
        n = task.lanes
        a, b, c = lanes(env[a_], n), lanes(env[b_], n), lanes(env[c_], n)
        env[r] = mfma.mfma_16x16x32_fp8(a, b, c, task.launch.arch) if fp8_ else mfma.mfma_16x16x16_bf16(a, b, c)
    return run


def _cvt_pk_fp8(op: Op) -> Callable[..., None]:
    a_, b_, old_ = op.args
    (r,) = op.res
    high = bool(op.attrs.get("wordSel", False))

    def run(task: Any, env: list, mask: Any) -> None:
        a, b, old = env[a_], env[b_], env[old_]
        n = max(a.shape[0], b.shape[0], old.shape[0])
        codes = fp8.encode(np.stack([lanes(a, n), lanes(b, n)], axis=1), task.launch.arch).astype(np.uint32)
        packed = codes[:, 0] | (codes[:, 1] << np.uint32(8))
        o = lanes(old, n).view(np.uint32)
        out = (o & np.uint32(0xFFFF)) | (packed << np.uint32(16)) if high else (o & np.uint32(0xFFFF0000)) | packed
        env[r] = out.view(np.int32)
    return run


# ------------------------------------------------------------------------------------------- control flow
def run_plain(task: Any, region: Region, env: list, mask: Any) -> None:
    for op in region.ops:
        op.hit = True
        op.run(task, env, mask)
        for s in op.kill:
            env[s] = None


def run_gen(task: Any, region: Region, env: list, mask: Any) -> Iterator[Any]:
    for op in region.ops:
        op.hit = True
        if op.generator:
            yield from op.run(task, env, mask)
        else:
            op.run(task, env, mask)
        for s in op.kill:
            env[s] = None


def _sub_mask(c: np.ndarray, mask: Any) -> tuple[Any, bool]:
    """(the lanes of ``mask`` where ``c`` holds, None for all of them; whether any lane is in it)."""
    if c.shape[0] == 1:
        return (mask, bool(c[0]) and (mask is None or bool(mask.any())))
    m = c if mask is None else (c & mask)
    if not m.any():
        return m, False
    return (None if mask is None and m.all() else m), True


def _if(op: Op) -> Callable[..., Any]:
    (cs,) = op.args
    then, other = op.regions
    then_y = then.ops[-1].args if then.ops and then.ops[-1].name == "scf.yield" else ()
    else_y = other.ops[-1].args if other.ops and other.ops[-1].name == "scf.yield" else ()
    res = op.res

    def merge(env: list, c: np.ndarray, ran_then: bool, ran_else: bool) -> None:
        for i, r in enumerate(res):
            if ran_then and ran_else:
                env[r] = where(c, env[then_y[i]], env[else_y[i]])
            else:
                env[r] = env[then_y[i]] if ran_then else env[else_y[i]]

    def plan(task: Any, env: list, mask: Any) -> tuple:
        c = env[cs]
        m_then, any_then = _sub_mask(c, mask)
        m_else, any_else = _sub_mask(~c, mask)
        if not any_then and not any_else and res:  # no lane active: any values
            any_else = bool(other.ops)
            any_then = not any_else
        return c, m_then, any_then, m_else, any_else

    if op.generator:
        def run_g(task: Any, env: list, mask: Any) -> Iterator[Any]:
            c, m_then, any_then, m_else, any_else = plan(task, env, mask)
            if any_then:
                yield from run_gen(task, then, env, m_then)
            if any_else:
                yield from run_gen(task, other, env, m_else)
            merge(env, c, any_then, any_else)
        return run_g

    def run(task: Any, env: list, mask: Any) -> None:
        c, m_then, any_then, m_else, any_else = plan(task, env, mask)
        if any_then:
            run_plain(task, then, env, m_then)
        if any_else:
            run_plain(task, other, env, m_else)
        merge(env, c, any_then, any_else)
    return run


def _for(op: Op) -> Callable[..., Any]:
    """Uniform bounds run as a Python range; bounds that differ between lanes (``range(wave, n, waves)``)
    run each lane's own iterations, lanes dropping out as their induction variable passes their bound."""
    lb_, ub_, step_, *init = op.args
    (body,) = op.regions
    iv, *carried = body.params
    y = body.ops[-1].args if body.ops and body.ops[-1].name == "scf.yield" else ()
    res = op.res
    t = op.arg_types[0].dtype

    def body_run(task: Any, env: list, mask: Any) -> Iterator[Any]:
        if op.generator:
            yield from run_gen(task, body, env, mask)
        else:
            run_plain(task, body, env, mask)

    def run_g(task: Any, env: list, mask: Any) -> Iterator[Any]:
        lb, ub, step = env[lb_], env[ub_], env[step_]
        vals = [env[s] for s in init]
        if lb.shape[0] == ub.shape[0] == step.shape[0] == 1:
            for i in range(int(lb[0]), int(ub[0]), int(step[0])):
                env[iv] = np.array([i], t)
                for p, v in zip(carried, vals, strict=True):
                    env[p] = v
                yield from body_run(task, env, mask)
                vals = [env[s] for s in y]
        else:
            k = 0
            while True:
                i = lb + k * step
                on = i < ub
                active, any_on = _sub_mask(on, mask)
                if not any_on:
                    break
                env[iv] = i
                for p, v in zip(carried, vals, strict=True):
                    env[p] = v
                yield from body_run(task, env, active)
                vals = [where(on, env[s], v) for s, v in zip(y, vals, strict=True)]
                k += 1
        for r, v in zip(res, vals, strict=True):
            env[r] = v

    if op.generator:
        return run_g

    def run(task: Any, env: list, mask: Any) -> None:
        for _ in run_g(task, env, mask):
            pass
    return run


def _while(op: Op) -> Callable[..., Iterator[Any]]:
    before, after = op.regions
    cond = before.ops[-1]
    y = after.ops[-1].args
    res = op.res
    op.generator = True

    def run(task: Any, env: list, mask: Any) -> Iterator[Any]:
        args = [env[s] for s in op.args]
        active = mask
        results: list[np.ndarray] = []
        first = True
        while True:
            for p, v in zip(before.params, args, strict=True):
                env[p] = v
            yield from run_gen(task, before, env, active)
            c = env[cond.args[0]]
            fwd = [env[s] for s in cond.args[1:]]
            leaving = ~c if active is None else (~c & active)
            results = fwd if first else [where(leaving, f, r) for f, r in zip(fwd, results, strict=True)]
            first = False
            stay, any_stay = _sub_mask(c, active)
            if not any_stay:
                break
            active = stay
            for p, v in zip(after.params, fwd, strict=True):
                env[p] = v
            yield from run_gen(task, after, env, active)
            new = [env[s] for s in y]
            spun = all(a is b or np.array_equal(a, b) for a, b in zip(new, args, strict=True))
            args = new
            yield ("poll" if spun else "step", op)  # a poll that read nothing new, or a loop that moved on
        for r, v in zip(res, results, strict=True):
            env[r] = v
    return run


# ------------------------------------------------------------------------------------------- waves
def _barrier(op: Op) -> Callable[..., None]:
    """The rendezvous of the block's waves (``gpu.barrier`` carries workgroup fences; ``s_barrier`` is treated
    alike). Every wave must reach it: one whose lanes are all masked off skips it on the hardware."""

    def run(task: Any, env: list, mask: Any) -> None:
        blocks = None
        if mask is not None:
            on = task.active_waves(mask).reshape(task.blocks, task.block_waves)
            blocks = on.any(axis=1)  # in a batch, a block whose lanes are all off skips it: it is not there
            for k in np.nonzero(blocks & ~on.all(axis=1))[0].tolist():
                bid = task.bid if task.blocks == 1 else task.bids[k]
                raise BarrierDivergence(
                    f"{op.name} at {op.where}: rank {task.rank} block {bid}: waves {np.nonzero(on[k])[0].tolist()} "
                    f"reach it and waves {np.nonzero(~on[k])[0].tolist()} skip it (every lane masked off), so the "
                    "block hangs or pairs the wrong barriers")
            if task.blocks == 1:
                blocks = None
        task.barrier(blocks)
    return run


def _fence(op: Op) -> Callable[..., None]:
    order, scope = _ordering(op)

    def run(task: Any, env: list, mask: Any) -> None:
        weak = task.launch.weak
        if weak is not None:
            on = task.active_waves(mask)
            if task.blocks == 1:
                weak.fence(task.gb, on, order, scope)
                return
            for k, waves in enumerate(on.reshape(task.blocks, task.block_waves)):
                if waves.any():
                    weak.fence(task.gbs[k], waves, order, scope)
    return run


# ------------------------------------------------------------------------------------------- binding
def _noop(task: Any, env: list, mask: Any) -> None:
    return None


# The comparisons and clamps whose operands a launch can record (``Launch.compares``).
COMPARED = ("arith.cmpi", "arith.minsi", "arith.maxsi", "arith.cmpf")


def _compared(op: Op, plain: Callable[..., None]) -> Callable[..., None]:
    """``plain``, and where the launch records comparisons, what the op's active lanes met, by op: for integers the
    differences ``lhs - rhs`` (clipped to -2..2), for floats the outcomes (False, True); so a test sees every bound
    the kernel compares against met just below, at and just above (``tests/kernels/drafter_wide/test_bounds.py``)."""
    x, y = op.args
    (r,) = op.res
    floats = op.name == "arith.cmpf"

    def run(task: Any, env: list, mask: Any) -> None:
        plain(task, env, mask)
        seen = task.launch.compares
        if seen is None:
            return
        a, b, out = np.broadcast_arrays(env[x], env[y], env[r])
        if mask is not None and a.shape[0] != 1:
            a, b, out = a[mask], b[mask], out[mask]
        met = out.astype(bool) if floats else np.clip(a.astype(np.int64) - b.astype(np.int64), -2, 2)
        seen.setdefault(id(op), set()).update(np.unique(met).tolist())
    return run


def _run_of(op: Op, program: Any) -> Callable[..., Any]:
    n = op.name
    dialect = n.split(".", 1)[0]
    if n in TERMINATORS or n in ("rocdl.s.sleep", "rocdl.sched.barrier", "rocdl.s.waitcnt"):
        return _noop  # a sleep, or waits for counters: the interpreter's accesses complete at once
    if n in ("gpu.barrier", "rocdl.s.barrier"):
        return _barrier(op)
    if n == "llvm.fence":
        return _fence(op)
    if n == "arith.constant" or n == "llvm.mlir.constant":
        value = _constant(op)
        (r,) = op.res

        def const(task: Any, env: list, mask: Any) -> None:
            env[r] = value
        return const
    if n in ("scf.if", "scf.for", "scf.while"):
        return {"scf.if": _if, "scf.for": _for, "scf.while": _while}[n](op)
    if n == "gpu.thread_id" or n == "gpu.block_id" or n == "gpu.block_dim":
        (r,) = op.res
        dim = str(op.attrs.get("dimension", "x"))[-2]

        def ids(task: Any, env: list, mask: Any) -> None:
            if n == "gpu.thread_id":
                env[r] = task.tid if dim == "x" else np.zeros(1, np.int64)
            elif n == "gpu.block_id":
                env[r] = task.block_id if dim == "x" else np.zeros(1, np.int64)
            else:
                env[r] = np.array([task.threads if dim == "x" else 1], np.int64)
        return ids
    if n == "gpu.shuffle":
        return _shuffle(op)
    if n == "llvm.load":
        return _load(op, program)
    if n == "llvm.store":
        return _store(op, program)
    if n == "llvm.cmpxchg":
        return _cmpxchg(op, program)
    if n in ("llvm.inttoptr", "llvm.ptrtoint", "llvm.bitcast"):
        return _pure(op, lambda a: a.astype(np.int64))
    if n == "llvm.mlir.addressof":
        name = op.attrs["global_name"].lstrip("@")
        offset = 0
        for g, (space, size) in program.globals.items():
            if g == name:
                break
            offset += size if space == 3 else 0
        value = np.array([offset], np.int64)
        (r,) = op.res

        def addr(task: Any, env: list, mask: Any) -> None:
            env[r] = value
        return addr
    if n == "llvm.getelementptr":
        return _pure(op, _gep(op))
    if n == "llvm.extractvalue":
        (pos,) = op.attrs["position"]
        return _pure(op, lambda s: s[pos])
    if n == "llvm.call_intrinsic":
        return _intrinsic(op)
    if n == "rocdl.cvt.pk.fp8.f32":
        return _cvt_pk_fp8(op)
    if n.startswith("rocdl.mfma"):
        return _mfma(op)
    if n in COMPARED:
        return _compared(op, _pure(op, _float_op(op) if n == "arith.cmpf" else _int_op(op)))
    if dialect in ("arith", "math", "vector"):
        for family in (_int_op, _float_op, _vector_op):
            try:
                return _pure(op, family(op))
            except KeyError:
                continue
    raise KeyError(n)


def _has_yield(region: Region) -> bool:
    return any(op.generator for op in region.ops)


def bind(region: Region, program: Any) -> None:
    """Give every op of ``region`` (innermost first) its ``run``, or fail naming the op and its line."""
    for op in region.ops:
        for r in op.regions:
            bind(r, program)
        op.generator = op.generator or any(_has_yield(r) for r in op.regions)
        try:
            op.run = _run_of(op, program)
        except KeyError as e:
            raise UnknownOp(f"the interpreter has no meaning for {op.name} ({e.args[0]}) at {op.where}") from None
