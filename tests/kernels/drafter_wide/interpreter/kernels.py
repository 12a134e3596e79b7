"""Small AMDGPU kernels in MLIR text (the dialects FlyDSL's structured stage uses), for the
interpreter's tests: each exercises one behaviour, parsed without FlyDSL's compile."""

HEAD = 'module attributes {gpu.container_module} {\n gpu.module @m {\n'
TAIL = ' }\n}\n'


def kernel(params: str, body: str, lanes: int = 64, lds: int = 0) -> str:
    glob = (f'  llvm.mlir.global external @lds() {{addr_space = 3 : i32, alignment = 16 : i64}} '
            f': !llvm.array<{lds} x i8>\n') if lds else ''
    attrs = f'{{known_block_size = array<i32: {lanes}, 1, 1>}}'
    func = f'  gpu.func @k({params}) kernel attributes {attrs} {{\n'
    return HEAD + glob + func + body + '   gpu.return\n  }\n' + TAIL


TID = '''   %t = gpu.thread_id x
   %ti = arith.index_cast %t : index to i32
   %c0 = arith.constant 0 : i32
   %c1 = arith.constant 1 : i32
   %c2 = arith.constant 2 : i32
   %c4_64 = arith.constant 4 : i64
'''

# out[tid] = (tid odd ? 2 tid : -tid) for tid < n: lanes past n store nothing (and would fault).
DIVERGENT_STORE = kernel('%out: i64, %n: i32', TID + '''   %r = arith.remsi %ti, %c2 : i32
   %odd = arith.cmpi ne, %r, %c0 : i32
   %v = scf.if %odd -> (i32) {
     %x = arith.muli %ti, %c2 : i32
     scf.yield %x : i32
   } else {
     %y = arith.subi %c0, %ti : i32
     scf.yield %y : i32
   }
   %inb = arith.cmpi slt, %ti, %n : i32
   scf.if %inb {
     %e = arith.extsi %ti : i32 to i64
     %o = arith.muli %e, %c4_64 : i64
     %a = arith.addi %out, %o : i64
     %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
     llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
   }
''')

# out[tid] = the number of iterations of a loop that runs tid times, and the lane's value after
# a shuffle xor 1 (as float32), at out[64 + tid].
PER_LANE_LOOP = kernel('%out: i64', TID + '''   %n = scf.while (%i = %c0) : (i32) -> i32 {
     %lt = arith.cmpi slt, %i, %ti : i32
     scf.condition(%lt) %i : i32
   } do {
   ^bb0(%i: i32):
     %i1 = arith.addi %i, %c1 : i32
     scf.yield %i1 : i32
   }
   %e = arith.extsi %ti : i32 to i64
   %o = arith.muli %e, %c4_64 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %n, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
   %f = arith.sitofp %ti : i32 to f32
   %c64 = arith.constant 64 : i32
   %s, %valid = gpu.shuffle xor %f, %c1, %c64 : f32
   %c256 = arith.constant 256 : i64
   %a2 = arith.addi %a, %c256 : i64
   %p2 = llvm.inttoptr %a2 : i64 to !llvm.ptr<1>
   llvm.store %s, %p2 {alignment = 4 : i64} : f32, !llvm.ptr<1>
''')

# Block 0 polls ``flag`` until it reads 1, then copies data[0] to data[1]; block 1 stores data[0] = 42
# and publishes 1 into ``pub`` (the same word as ``flag``, or another: then nobody ever wakes block 0).
# ``deadline`` > 0: block 0 also stops polling when s_memrealtime passes it, and stores -1 instead.
HANDOFF = kernel('%flag: i64, %data: i64, %pub: i64, %deadline: i64', TID + '''   %true = arith.constant true
   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %p = llvm.inttoptr %flag : i64 to !llvm.ptr<1>
   %dp = llvm.inttoptr %data : i64 to !llvm.ptr<1>
   %d1 = arith.addi %data, %c4_64 : i64
   %dp1 = llvm.inttoptr %d1 : i64 to !llvm.ptr<1>
   %is0 = arith.cmpi eq, %bi, %c0 : i32
   %c0_64 = arith.constant 0 : i64
   %timed = arith.cmpi sgt, %deadline, %c0_64 : i64
   scf.if %is0 {
     %v0 = llvm.load %p atomic syncscope("one-as") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     %w = scf.while (%v = %v0) : (i32) -> i32 {
       %ne = arith.cmpi ne, %v, %c1 : i32
       %now = llvm.call_intrinsic "llvm.amdgcn.s.memrealtime"() : () -> i64
       %early = arith.cmpi slt, %now, %deadline : i64
       %untimed = arith.xori %timed, %true : i1
       %live = arith.ori %early, %untimed : i1
       %go = arith.andi %ne, %live : i1
       scf.condition(%go) %v : i32
     } do {
     ^bb0(%v: i32):
       rocdl.s.sleep 1
       %v2 = llvm.load %p atomic syncscope("one-as") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
       scf.yield %v2 : i32
     }
     %got = arith.cmpi eq, %w, %c1 : i32
     %x = llvm.load %dp {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     %m1 = arith.constant -1 : i32
     %y = arith.select %got, %x, %m1 : i32
     llvm.store %y, %dp1 {alignment = 4 : i64} : i32, !llvm.ptr<1>
   } else {
     %c42 = arith.constant 42 : i32
     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     %pp = llvm.inttoptr %pub : i64 to !llvm.ptr<1>
     llvm.store %c1, %pp atomic syncscope("one-as") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
   }
''')

# An op the interpreter has no meaning for.
UNKNOWN = kernel('%out: i64', TID + '''   %q = arith.ceildivsi %ti, %c2 : i32
''')

# LDS: lane tid writes its id to word tid, then reads word (tid + 1) % 64 back and stores it to out[tid].
LDS_ROTATE = kernel('%out: i64', TID + '''   %base = llvm.mlir.addressof @lds : !llvm.ptr<3>
   %w = llvm.getelementptr %base[%ti] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   llvm.store %ti, %w {alignment = 4 : i64} : i32, !llvm.ptr<3>
   gpu.barrier
   %c64 = arith.constant 64 : i32
   %n = arith.addi %ti, %c1 : i32
   %m = arith.remsi %n, %c64 : i32
   %r = llvm.getelementptr %base[%m] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   %v = llvm.load %r {alignment = 4 : i64} : !llvm.ptr<3> -> i32
   %e = arith.extsi %ti : i32 to i64
   %o = arith.muli %e, %c4_64 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
''', lds=256)

# Rank 0 reads word 0 of ``peer`` (rank 1's memory) with a plain load, polls ``flag`` until rank 1 has written
# words 0 and 32 (another 128-byte line) and published, then reads word 0 plainly again, word 0 with a relaxed
# system-scope load and word 32 plainly: into out[0..3].
PEER_READ = kernel('%peer: i64, %out: i64, %flag: i64, %reader: i32', TID + '''\
   %p0 = llvm.inttoptr %peer : i64 to !llvm.ptr<1>
   %c128 = arith.constant 128 : i64
   %a32 = arith.addi %peer, %c128 : i64
   %p32 = llvm.inttoptr %a32 : i64 to !llvm.ptr<1>
   %fp = llvm.inttoptr %flag : i64 to !llvm.ptr<1>
   %o0 = llvm.inttoptr %out : i64 to !llvm.ptr<1>
   %c8_64 = arith.constant 8 : i64
   %c12_64 = arith.constant 12 : i64
   %a1 = arith.addi %out, %c4_64 : i64
   %o1 = llvm.inttoptr %a1 : i64 to !llvm.ptr<1>
   %a2 = arith.addi %out, %c8_64 : i64
   %o2 = llvm.inttoptr %a2 : i64 to !llvm.ptr<1>
   %a3 = arith.addi %out, %c12_64 : i64
   %o3 = llvm.inttoptr %a3 : i64 to !llvm.ptr<1>
   %is_reader = arith.cmpi eq, %reader, %c1 : i32
   scf.if %is_reader {
     %v0 = llvm.load %p0 {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     llvm.store %v0, %o0 {alignment = 4 : i64} : i32, !llvm.ptr<1>
     %f0 = llvm.load %fp atomic syncscope("one-as") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     %w = scf.while (%f = %f0) : (i32) -> i32 {
       %ne = arith.cmpi ne, %f, %c1 : i32
       scf.condition(%ne) %f : i32
     } do {
     ^bb0(%f: i32):
       rocdl.s.sleep 1
       %f2 = llvm.load %fp atomic syncscope("one-as") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
       scf.yield %f2 : i32
     }
     %v1 = llvm.load %p0 {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     llvm.store %v1, %o1 {alignment = 4 : i64} : i32, !llvm.ptr<1>
     %v2 = llvm.load %p0 atomic syncscope("one-as") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     llvm.store %v2, %o2 {alignment = 4 : i64} : i32, !llvm.ptr<1>
     %v3 = llvm.load %p32 {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     llvm.store %v3, %o3 {alignment = 4 : i64} : i32, !llvm.ptr<1>
   } else {
     %c7 = arith.constant 7 : i32
     %c9 = arith.constant 9 : i32
     llvm.store %c7, %p0 {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c9, %p32 {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c1, %fp atomic syncscope("one-as") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
   }
''', lanes=1)


def lds_share(first_barrier: bool = True, second_barrier: bool = True, uniform_barrier: bool = True) -> str:
    """Two waves share LDS: lane tid writes word tid, then reads word (tid + 64) % 128 (the other wave's) into
    out[tid], then writes word tid again (what the other wave read). Each barrier may be left out; with
    ``uniform_barrier`` False the first barrier sits inside ``if tid < 64`` (wave 0 only)."""
    barrier1 = '   gpu.barrier\n' if uniform_barrier else '''   %c64b = arith.constant 64 : i32
   %w0 = arith.cmpi slt, %ti, %c64b : i32
   scf.if %w0 {
     gpu.barrier
   }
'''
    return kernel('%out: i64', TID + '''   %base = llvm.mlir.addressof @lds : !llvm.ptr<3>
   %w = llvm.getelementptr %base[%ti] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   llvm.store %ti, %w {alignment = 4 : i64} : i32, !llvm.ptr<3>
''' + (barrier1 if first_barrier else '') + '''   %c64 = arith.constant 64 : i32
   %c128 = arith.constant 128 : i32
   %n = arith.addi %ti, %c64 : i32
   %m = arith.remsi %n, %c128 : i32
   %r = llvm.getelementptr %base[%m] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   %v = llvm.load %r {alignment = 4 : i64} : !llvm.ptr<3> -> i32
   %e = arith.extsi %ti : i32 to i64
   %o = arith.muli %e, %c4_64 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
''' + ('   gpu.barrier\n' if second_barrier else '') + '''   %t2 = arith.addi %ti, %c128 : i32
   llvm.store %t2, %w {alignment = 4 : i64} : i32, !llvm.ptr<3>
''', lanes=128, lds=512)


# Poll ``flag`` with ``ACQ`` loads until it reads 1, then read data[0] into %x (``weak_handoff``, ``weak_fanout``).
POLL_THEN_READ = '''     %v0 = llvm.load %fp atomic syncscope("one-as") ACQ {alignment = 4 : i64} : !llvm.ptr<1> -> i32
     %w = scf.while (%v = %v0) : (i32) -> i32 {
       %ne = arith.cmpi ne, %v, %c1 : i32
       scf.condition(%ne) %v : i32
     } do {
     ^bb0(%v: i32):
       rocdl.s.sleep 1
       %v2 = llvm.load %fp atomic syncscope("one-as") ACQ {alignment = 4 : i64} : !llvm.ptr<1> -> i32
       scf.yield %v2 : i32
     }
     %x = llvm.load %dp {alignment = 4 : i64} : !llvm.ptr<1> -> i32
'''

# How the writer of ``weak_handoff`` publishes data[0] = 42 behind flag = 1.
PUBLISH = {
    "release store": '''     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c1, %fp atomic syncscope("one-as") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
    "fence then relaxed store": '''     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.fence syncscope("one-as") release
     llvm.store %c1, %fp atomic syncscope("one-as") monotonic {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
    "agent release store": '''     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c1, %fp atomic syncscope("agent-one-as") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
    # planted bugs
    "tag before data": '''\
     llvm.store %c1, %fp atomic syncscope("one-as") release {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
    "relaxed store, no fence": '''     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.store %c1, %fp atomic syncscope("one-as") monotonic {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
    "workgroup fence": '''     llvm.store %c42, %dp {alignment = 4 : i64} : i32, !llvm.ptr<1>
     llvm.fence syncscope("workgroup-one-as") release
     llvm.store %c1, %fp atomic syncscope("one-as") monotonic {alignment = 4 : i64} : i32, !llvm.ptr<1>
''',
}


def weak_handoff(publish: str, acquire: str = "acquire") -> str:
    """Block ``reader`` polls ``flag`` (with ``acquire`` loads) until it reads 1, then copies data[0] into
    out[0]; every other block publishes data[0] = 42 as ``PUBLISH[publish]`` says."""
    return kernel('%flag: i64, %data: i64, %out: i64, %reader: i32', TID + '''   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %fp = llvm.inttoptr %flag : i64 to !llvm.ptr<1>
   %dp = llvm.inttoptr %data : i64 to !llvm.ptr<1>
   %op = llvm.inttoptr %out : i64 to !llvm.ptr<1>
   %c42 = arith.constant 42 : i32
   %is_reader = arith.cmpi eq, %bi, %reader : i32
   scf.if %is_reader {
''' + POLL_THEN_READ.replace("ACQ", acquire) + '''     llvm.store %x, %op {alignment = 4 : i64} : i32, !llvm.ptr<1>
   } else {
''' + PUBLISH[publish] + '''   }
''', lanes=1)


def narrow_window(window: bool = True) -> str:
    """Block b spins 4 b loop trips, then adds 1 to ``counter`` with a relaxed atomic load and store; with
    ``window``, one more loop trip (a point where another block may run) lies between the two, so two blocks
    whose read-modify-writes overlap lose an update. The round robin keeps every block's window apart."""
    gap = '''   %g = scf.while (%j = %c0) : (i32) -> i32 {
     %lt1 = arith.cmpi slt, %j, %c1 : i32
     scf.condition(%lt1) %j : i32
   } do {
   ^bb0(%j: i32):
     %j1 = arith.addi %j, %c1 : i32
     scf.yield %j1 : i32
   }
''' if window else ''
    return kernel('%counter: i64', TID + '''   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %c4 = arith.constant 4 : i32
   %lead = arith.muli %bi, %c4 : i32
   %cp = llvm.inttoptr %counter : i64 to !llvm.ptr<1>
   %s = scf.while (%i = %c0) : (i32) -> i32 {
     %lt = arith.cmpi slt, %i, %lead : i32
     scf.condition(%lt) %i : i32
   } do {
   ^bb0(%i: i32):
     %i1 = arith.addi %i, %c1 : i32
     scf.yield %i1 : i32
   }
   %v = llvm.load %cp atomic syncscope("one-as") monotonic {alignment = 4 : i64} : !llvm.ptr<1> -> i32
''' + gap + '''   %v1 = arith.addi %v, %c1 : i32
   llvm.store %v1, %cp atomic syncscope("one-as") monotonic {alignment = 4 : i64} : i32, !llvm.ptr<1>
''', lanes=1)


def block_share(first_barrier: bool = True, barrier_in_block: int = -1) -> str:
    """As ``lds_share`` (two waves swap words through LDS), a block's words offset by 1000 x its block id, and
    out[128 block + tid] written: several blocks, each its own LDS. With ``barrier_in_block`` >= 0 the first
    barrier sits inside ``if block == barrier_in_block and tid < 64``: that block's wave 0 only."""
    if barrier_in_block >= 0:
        barrier1 = f'''   %c64b = arith.constant 64 : i32
   %w0 = arith.cmpi slt, %ti, %c64b : i32
   %cb = arith.constant {barrier_in_block} : i32
   %isb = arith.cmpi eq, %bi, %cb : i32
   %both = arith.andi %w0, %isb : i1
   scf.if %both {{
     gpu.barrier
   }}
'''
    else:
        barrier1 = '   gpu.barrier\n' if first_barrier else ''
    return kernel('%out: i64', TID + '''   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %c1000 = arith.constant 1000 : i32
   %bk = arith.muli %bi, %c1000 : i32
   %word = arith.addi %ti, %bk : i32
   %base = llvm.mlir.addressof @lds : !llvm.ptr<3>
   %w = llvm.getelementptr %base[%ti] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   llvm.store %word, %w {alignment = 4 : i64} : i32, !llvm.ptr<3>
''' + barrier1 + '''   %c64 = arith.constant 64 : i32
   %c128 = arith.constant 128 : i32
   %n = arith.addi %ti, %c64 : i32
   %m = arith.remsi %n, %c128 : i32
   %r = llvm.getelementptr %base[%m] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
   %v = llvm.load %r {alignment = 4 : i64} : !llvm.ptr<3> -> i32
   %row = arith.muli %bi, %c128 : i32
   %slot = arith.addi %row, %ti : i32
   %e = arith.extsi %slot : i32 to i64
   %o = arith.muli %e, %c4_64 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
''', lanes=128, lds=512)


def weak_fanout(publish: str) -> str:
    """Block 0 publishes data[0] = 42 as ``PUBLISH[publish]`` says; every other block polls ``flag`` with acquire
    loads until it reads 1, then copies data[0] into out[block]: readers that may run as one batch, after the
    writer in program order."""
    return kernel('%flag: i64, %data: i64, %out: i64', TID + '''   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %fp = llvm.inttoptr %flag : i64 to !llvm.ptr<1>
   %dp = llvm.inttoptr %data : i64 to !llvm.ptr<1>
   %c42 = arith.constant 42 : i32
   %is_writer = arith.cmpi eq, %bi, %c0 : i32
   scf.if %is_writer {
''' + PUBLISH[publish] + '''   } else {
''' + POLL_THEN_READ.replace("ACQ", "acquire") + '''     %e = arith.extsi %bi : i32 to i64
     %o = arith.muli %e, %c4_64 : i64
     %oa = arith.addi %out, %o : i64
     %op = llvm.inttoptr %oa : i64 to !llvm.ptr<1>
     llvm.store %x, %op {alignment = 4 : i64} : i32, !llvm.ptr<1>
   }
''', lanes=1)


def lds_same_bytes(access: str, barrier: bool = False, writer: int = 0) -> str:
    """Both waves' lanes of one op meet at the same LDS bytes: lane tid accesses the i32 at byte
    ``4 (tid % 4) + shift``. ``access``: "store" (every lane stores tid there, aligned), "store unaligned"
    (shift 2, alignment 1) or "read then write" (every lane reads it, then [a barrier, then] lanes ``writer`` to
    ``writer + 3`` store)."""
    shift = 2 if access == "store unaligned" else 0
    align = 1 if shift else 4
    at = f'''   %base = llvm.mlir.addressof @lds : !llvm.ptr<3>
   %c4 = arith.constant 4 : i32
   %q = arith.remsi %ti, %c4 : i32
   %q4 = arith.muli %q, %c4 : i32
   %sh = arith.constant {shift} : i32
   %off = arith.addi %q4, %sh : i32
   %w = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
'''
    if access.startswith("store"):
        store = f'   llvm.store %ti, %w {{alignment = {align} : i64}} : i32, !llvm.ptr<3>\n'
        return kernel('%out: i64', TID + at + store, lanes=128, lds=64)
    return kernel('%out: i64', TID + at + '''   %v = llvm.load %w {alignment = 4 : i64} : !llvm.ptr<3> -> i32
   %e = arith.extsi %ti : i32 to i64
   %o = arith.muli %e, %c4_64 : i64
   %a = arith.addi %out, %o : i64
   %p = llvm.inttoptr %a : i64 to !llvm.ptr<1>
   llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<1>
''' + ('   gpu.barrier\n' if barrier else '') + f'''   %lo = arith.constant {writer} : i32
   %hi = arith.constant {writer + 4} : i32
   %ge = arith.cmpi sge, %ti, %lo : i32
   %lt = arith.cmpi slt, %ti, %hi : i32
   %first = arith.andi %ge, %lt : i1
   scf.if %first {{
     llvm.store %ti, %w {{alignment = 4 : i64}} : i32, !llvm.ptr<3>
   }}
''', lanes=128, lds=64)


def slow_publisher(trips: int) -> str:
    """Block 0 runs ``trips`` loop trips (each a point where another block may run), then releases ``flag`` = 1;
    every other block polls it (acquire loads) until it reads 1."""
    return kernel('%flag: i64', TID + f'''   %b = gpu.block_id x
   %bi = arith.index_cast %b : index to i32
   %fp = llvm.inttoptr %flag : i64 to !llvm.ptr<1>
   %trips = arith.constant {trips} : i32
   %first = arith.cmpi eq, %bi, %c0 : i32
   scf.if %first {{
     %s = scf.while (%i = %c0) : (i32) -> i32 {{
       %lt = arith.cmpi slt, %i, %trips : i32
       scf.condition(%lt) %i : i32
     }} do {{
     ^bb0(%i: i32):
       %i1 = arith.addi %i, %c1 : i32
       scf.yield %i1 : i32
     }}
     llvm.store %c1, %fp atomic syncscope("one-as") release {{alignment = 4 : i64}} : i32, !llvm.ptr<1>
   }} else {{
     %v0 = llvm.load %fp atomic syncscope("one-as") acquire {{alignment = 4 : i64}} : !llvm.ptr<1> -> i32
     %w = scf.while (%v = %v0) : (i32) -> i32 {{
       %ne = arith.cmpi ne, %v, %c1 : i32
       scf.condition(%ne) %v : i32
     }} do {{
     ^bb0(%v: i32):
       rocdl.s.sleep 1
       %v2 = llvm.load %fp atomic syncscope("one-as") acquire {{alignment = 4 : i64}} : !llvm.ptr<1> -> i32
       scf.yield %v2 : i32
     }}
   }}
''', lanes=1)
