"""What the engine and the CLI read of the ranker (its plugin, its kernel hash, its tile fields) loads without
JAX: a command that only reads spaces, tables and journals does not pay for JAX's import (a one-line refusal of a
bad space took 2.0 s, 1.1 s of it JAX and Mosaic GPU; 0.7 s without)."""

import subprocess
import sys

from kerneltune.kernels.ranker_attention import source


def test_the_plugin_and_the_package_load_without_jax():
    code = ("import sys; import kerneltune.kernels.ranker_attention.plugin as p; "
            "from kerneltune.kernels.ranker_attention import KernelConfig; p.PLUGIN.source_hash(); "
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout[-2000:] + r.stderr[-2000:]


def test_the_launch_api_is_the_packages_on_first_use():
    import kerneltune.kernels.ranker_attention as ra
    from kerneltune.kernels.ranker_attention import api

    assert ra.ranker_attention is api.ranker_attention
    assert api.kernel_source_hash is source.kernel_source_hash


def test_a_tile_field_of_another_type_or_unknown_is_named():
    assert source.tile_type_error({"block_q": 64, "persistent": True}) is None
    assert "block_q: 64.0 is a float, not a int" in source.tile_type_error({"block_q": 64.0})
    assert "persistent: 'false' is a str" in source.tile_type_error({"persistent": "false"})
    assert "nope: not a tile field of the ranker" in source.tile_type_error({"nope": 1})
