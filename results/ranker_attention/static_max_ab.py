"""A/B of the softmax without a running max under a bounding cap (run H, attempt 9).

A = the committed kernel (running max on every step), B = the working tree (with a cap of at most
44.4, p = exp2(logit) directly: no row max, no rescale of O and l). Persistent q64 kv128 s2 on the
bench's rows with the exact and the approximate tanh, the softsign bucket's rows, and the bench's
T=2k row without a cap as the control (B leaves that path as it is). Every output is poisoned and
checked as in schedule_ab.py. Run once per kernel version (PYTHONPATH picks it), on two GPUs in
opposite orders (A B on one, B A on the other).

Usage: python3 static_max_ab.py LABEL OUT.json
"""

import sys

from schedule_ab import equal, rows, run_shapes

T2K = dict(batch=16, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128)
T8K = dict(batch=4, seq_len=8192, q_heads=16, kv_heads=16, head_dim=128)
D64 = dict(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64)
TANH = dict(cap_method="tanh", cap=30.0)
APPROX = dict(cap_method="tanh_approx", cap=30.0)
SHAPES = {
    "bench t2k rows tanh": ({**T2K, **TANH}, rows(16, 2048, (1536, 1792), 256)),
    "bench d64 rows tanh": ({**D64, **TANH}, rows(64, 1024, (768, 896), 128)),
    "bench t2k none (control)": (T2K, equal(16, (0, 1754, 1754, 2010))),
    "bench t2k rows tanh_approx": ({**T2K, **APPROX}, rows(16, 2048, (1536, 1792), 256)),
    "bench d64 rows tanh_approx": ({**D64, **APPROX}, rows(64, 1024, (768, 896), 128)),
    "bucket d64-softsign rows": (dict(batch=32, seq_len=2048, q_heads=4, kv_heads=4, head_dim=64,
                                      cap_method="softsign", cap=20.0), rows(32, 2048, (1800, 1900), 32)),
    "bench t8k rows tanh": ({**T8K, **TANH}, rows(4, 8192, (6912, 7168), 1024)),
    "bench t8k rows tanh_approx": ({**T8K, **APPROX}, rows(4, 8192, (6912, 7168), 1024)),
}

if __name__ == "__main__":
    run_shapes(sys.argv[1], sys.argv[2], SHAPES)
