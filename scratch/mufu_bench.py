"""Throughput of the special-function ops the ranker's softmax and cap use, on this GPU (Triton inline PTX).

Each program holds BLOCK independent chains (8 a thread at 4 warps) and applies ASM to each ITERS times; many
programs a SM, so the unit, not the chain's latency, is the bound. Prints instructions a clock a SM (with the
SM clock nvidia-smi reports during the loop) and each op's time over ex2.approx.ftz.f32's, same run.
"""
import json
import subprocess
import sys
import threading

import torch
import triton
import triton.language as tl


@triton.jit
def chain(x_ptr, o_ptr, ASM: tl.constexpr, ITERS: tl.constexpr, BLOCK: tl.constexpr, PACK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(ITERS):
        x = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=x.dtype, is_pure=True, pack=PACK)
    tl.store(o_ptr + offs, x)


F32 = [
    ("ex2.approx.ftz.f32", "ex2.approx.ftz.f32 $0, $1;", 1),
    ("ex2.approx.f32", "ex2.approx.f32 $0, $1;", 1),
    ("tanh.approx.f32", "tanh.approx.f32 $0, $1;", 1),
    ("rsqrt.approx.ftz.f32", "rsqrt.approx.ftz.f32 $0, $1;", 1),
    ("rcp.approx.ftz.f32", "rcp.approx.ftz.f32 $0, $1;", 1),
    ("tanh then ex2 (2 ops)", "{ .reg .f32 t; tanh.approx.f32 t, $1; ex2.approx.ftz.f32 $0, t; }", 2),
    ("tanh then tanh (2 ops)", "{ .reg .f32 t; tanh.approx.f32 t, $1; tanh.approx.f32 $0, t; }", 2),
    ("ex2 then ex2 (2 ops)", "{ .reg .f32 t; ex2.approx.ftz.f32 t, $1; ex2.approx.ftz.f32 $0, t; }", 2),
    ("fma.rn.f32", "fma.rn.f32 $0, $1, $1, $1;", 1),
]
PACKED = [
    ("tanh.approx.bf16x2", "tanh.approx.bf16x2 $0, $1;", 1),
    ("ex2.approx.ftz.bf16x2", "ex2.approx.ftz.bf16x2 $0, $1;", 1),
]
PACKED_F16 = [
    ("tanh.approx.f16x2", "tanh.approx.f16x2 $0, $1;", 1),
    ("ex2.approx.f16x2", "ex2.approx.f16x2 $0, $1;", 1),
]


def sm_clock(samples: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.split()
        if out:
            samples.append(int(out[0]))
        stop.wait(0.2)


def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    block, iters, programs = 1024, 4096, sms * 32
    n = block * programs
    rows = []
    for dtype, ops in ((torch.float32, F32), (torch.bfloat16, PACKED), (torch.float16, PACKED_F16)):
        x = (torch.rand(n, device="cuda", dtype=torch.float32) * 0.5).to(dtype)
        o = torch.empty_like(x)
        pack = 1 if dtype == torch.float32 else 2
        for name, asm, ops_per in ops:
            run = lambda: chain[(programs,)](x, o, ASM=asm, ITERS=iters, BLOCK=block, PACK=pack, num_warps=4)  # noqa: E731
            run()
            torch.cuda.synchronize()
            samples: list[int] = []
            stop = threading.Event()
            t = threading.Thread(target=sm_clock, args=(samples, stop))
            t.start()
            times = []
            for _ in range(15):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                run()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e) * 1e-3)
            stop.set()
            t.join()
            sec = sorted(times)[len(times) // 2]
            instr = n // pack * iters * ops_per  # PTX instructions (a packed op counts once)
            mhz = sorted(samples)[len(samples) // 2] if samples else float("nan")
            rows.append({"op": name, "median_s": sec, "instructions": instr, "sm_mhz": mhz,
                         "instr_per_clk_per_sm": instr / sec / sms / (mhz * 1e6),
                         "elements_per_clk_per_sm": instr * pack / sec / sms / (mhz * 1e6)})
            print(json.dumps(rows[-1]), flush=True)
    base = next(r for r in rows if r["op"] == "ex2.approx.ftz.f32")
    print(f"\n{'op':32s} {'instr/clk/SM':>13s} {'elem/clk/SM':>12s} {'time/instr over ex2.ftz':>24s} {'MHz':>6s}")
    for r in rows:
        rel = (r["median_s"] / r["instructions"]) / (base["median_s"] / base["instructions"])
        print(f"{r['op']:32s} {r['instr_per_clk_per_sm']:13.2f} {r['elements_per_clk_per_sm']:12.2f} {rel:24.3f} "
              f"{r['sm_mhz']:6.0f}")
    json.dump(rows, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
