"""Run AK: kernel.py with named scopes (Mosaic GPU's on-device profiler records each as a begin/end event per
warpgroup) written to kerneltune/kernels/ranker_attention/_kernel_profiled.py. Scopes are added by wrapping the
lines between two anchors in `with jax.named_scope(NAME):`; every anchor must match, or this fails."""

from pathlib import Path

SRC = Path("kerneltune/kernels/ranker_attention/kernel.py")
DST = SRC.with_name("_kernel_profiled.py")


def wrap(text: str, start: str, end: str | None, name: str, after: str = "") -> str:
    """Indent the lines from the one holding ``start`` to the one holding ``end`` (the first after ``after``)."""
    pos = text.index(after) if after else 0
    i = text.index(start, pos)
    line_start = text.rindex("\n", 0, i) + 1
    j = text.index(end, i) if end else i
    line_end = text.index("\n", j)
    block = text[line_start:line_end]
    indent = block[: len(block) - len(block.lstrip())]
    body = "\n".join("    " + ln if ln.strip() else ln for ln in block.split("\n"))
    return text[:line_start] + f'{indent}with jax.named_scope("{name}"):\n' + body + text[line_end:]


def main() -> None:
    t = SRC.read_text()
    # kv_step
    t = wrap(t, "qk = pl.run_scoped(compute_qk", None, "qk")
    t = wrap(t, "if fused_outer:  # the exp2", "acc, l_i, m_new, p16 = lax.optimization_barrier", "softmax")
    t = wrap(t, "plgpu.barrier_wait(v_ready.at[slot])", None, "wait_v", after="acc, l_i, m_new, p16 = lax.opt")
    t = wrap(t, "acc = pl.run_state(compute_pv)(plgpu.ACC.init(acc))", None, "pv", after="def wait_next_k")
    # the tile's diagonal steps and epilogue
    t = wrap(t, "carry = lax.fori_loop(hist_steps, total_steps, diagonal_step, carry)", None, "diag")
    t = wrap(t, "acc, m_i, l_i = carry\n                pl.when(wg == 0)(schedule_point)",
             "plgpu.copy_smem_to_gmem(lse_smem, lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])", "epilogue")
    t = wrap(t, "plgpu.barrier_wait(k_ready.at[ring(0)])", None, "wait_k0", after="def _compute():\n                m_i")
    t = wrap(t, "pl.when(wg == 1)(schedule_point)", None, "wg1_offset", after="def _compute():\n                m_i")
    t = wrap(t, "pl.when(~tile['valid'])(store_empty_rows)".replace("'", "\""), None, "empty_tile")
    # persistent loop, compute side
    t = wrap(t, "plgpu.barrier_wait(q_ready.at[2 * buf + wg])", None, "wait_q", after="def tile_step")
    t = wrap(t, "step_base = compute_tile(*coords(tile), buf, step_base)", None, "tile")
    t = wrap(t, "plgpu.barrier_wait(tile_ready.at[buf])", None, "wait_handoff", after="def tile_step")
    # memory side
    t = wrap(t, "nxt = cta + (j + 1) * ctas if interpret", None, "claim")
    t = wrap(t, "plgpu.barrier_wait(q_free.at[1 - buf])", None, "wait_qfree", after="def stream_step")
    t = wrap(t, "plgpu.barrier_wait(tile_taken.at[buf])", None, "wait_taken", after="def stream_step")
    t = t.replace("compiler_params=plgpu.CompilerParams(approx_math=config.fast_math),",
                  "compiler_params=plgpu.CompilerParams(approx_math=config.fast_math, profile_space=PROFILE_SPACE,\n"
                  "                                             profile_dir=PROFILE_DIR, profile_bounds_check=True),")
    assert "PROFILE_SPACE" in t
    t = t.replace("_HOPPER_SMS = 132\n", "_HOPPER_SMS = 132\nPROFILE_SPACE = 1200\nPROFILE_DIR = '/tmp/profile'\n")
    DST.write_text(t)


if __name__ == "__main__":
    main()
