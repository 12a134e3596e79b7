import re

import pytest

from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.tuning.space import SpaceError, load_space

from ..paths import SPACES

TUN, FIELDS = set(PLUGIN.tunables), set(PLUGIN.problem_fields)
GOOD = """kernel = "ranker_attention"
[params]
block_q = [64, 128]
num_stages = { range = [2, 4] }
[[constraints]]
expr = "block_q == 64 or head_dim <= 64"
[[buckets]]
name = "b"
problem = { batch = 1, seq_len = 512, q_heads = 1, kv_heads = 1, head_dim = 128 }
"""


def load(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return load_space(p, TUN, FIELDS)


def test_shipped_space_loads_and_is_large_enough():
    space = load_space(SPACES / "ranker_attention.toml", TUN, FIELDS)
    assert len(space.buckets) >= 4
    assert sum(1 for _ in space.configs(PLUGIN.problem_dict(PLUGIN.problem(space.buckets[0].problem)))) >= 12


def test_good_space(tmp_path):
    s = load(tmp_path, GOOD)
    assert s.params["num_stages"] == [2, 3, 4]
    assert list(s.configs({"head_dim": 128})) == [{"block_q": 64, "num_stages": n} for n in (2, 3, 4)]


@pytest.mark.parametrize(("text", "match"), [
    (GOOD.replace("block_q = [64, 128]", "block_q = [64, 128"), r"s\.toml: malformed TOML"),
    (GOOD.replace("block_q = [64, 128]", "block_qq = [64]"), r"s\.toml:3: params\.block_qq: unknown parameter"),
    (GOOD.replace("block_q = [64, 128]", "block_q = []"), r"s\.toml:3: params\.block_q: the list of values is empty"),
    (GOOD.replace("range = [2, 4]", "range = [4, 2]"), r"s\.toml:4: params\.num_stages: impossible range"),
    (GOOD.replace("block_q == 64 or head_dim <= 64", "block_q == 32"), r"s\.toml:6: constraints\[0\]\.expr: excludes"),
    (GOOD.replace("block_q == 64 or head_dim <= 64", "__import__('os')"), r"constraints\[0\]\.expr: Call is not"),
    (GOOD.replace("block_q == 64 or head_dim <= 64", "blk == 1"), r"unknown name 'blk'"),
    (GOOD.replace("head_dim = 128 }", "head_dim = 128, colour = 1 }"), r"buckets\[0\]\.problem: unknown field"),
    (GOOD.replace('kernel = "ranker_attention"', 'kernal = "x"'), r"s\.toml:1: unknown top-level field 'kernal'"),
])
def test_bad_space_names_file_line_and_field(tmp_path, text, match):
    with pytest.raises(SpaceError, match=match):
        load(tmp_path, text)


def test_constraints_combine_as_a_conjunction(tmp_path):
    """Each constraint alone removes its own configs; together they remove both sets."""
    p = tmp_path / "s.toml"
    p.write_text('kernel = "k"\n[params]\na = [1, 2, 3]\nb = [1, 2, 3]\n'
                 '[[constraints]]\nexpr = "a != 2"\n[[constraints]]\nexpr = "b != 3"\n'
                 '[[constraints]]\nexpr = "a + b <= n"\n[[buckets]]\nname = "x"\nproblem = { n = 5 }\n')
    space = load_space(p, {"a", "b"}, {"n"})
    got = {(c["a"], c["b"]) for c in space.configs({"n": 5})}
    assert got == {(a, b) for a in (1, 3) for b in (1, 2) if a + b <= 5}
    assert not space.allows({"a": 2, "b": 1}, {"n": 5}) and not space.allows({"a": 1, "b": 3}, {"n": 5})
    assert space.allows({"a": 1, "b": 1}, {"n": 5}) and not space.allows({"a": 3, "b": 2}, {"n": 4})


def _exact(tmp_path, message):
    return "^" + re.escape(message.format(p=tmp_path / "s.toml")) + "$"


@pytest.mark.parametrize(("old", "new", "message"), [
    ("block_q = [64, 128]", "block_q = [64, 64]", "{p}:3: params.block_q: values repeat: [64, 64]"),
    ("block_q = [64, 128]", 'block_q = "64"',
     "{p}:3: params.block_q: expected a list of values or {{ range = [lo, hi] }}"),
    ("block_q = [64, 128]", "block_q = { values = [64] }",
     "{p}:3: params.block_q: expected a list of values or {{ range = [lo, hi] }}"),
    ("range = [2, 4]", "range = [2, 4, 1, 1]",
     "{p}:4: params.num_stages: range must be [lo, hi] or [lo, hi, step] integers"),
    ("range = [2, 4]", "range = [2, 4.5]",
     "{p}:4: params.num_stages: range must be [lo, hi] or [lo, hi, step] integers"),
    ("range = [2, 4]", "range = 2", "{p}:4: params.num_stages: range must be [lo, hi] or [lo, hi, step] integers"),
    ("range = [2, 4]", "range = [2, 4, 0]",
     "{p}:4: params.num_stages: impossible range [2, 4, 0] (need lo <= hi, step > 0)"),
    ("range = [2, 4]", "range = [2, 4, -1]",
     "{p}:4: params.num_stages: impossible range [2, 4, -1] (need lo <= hi, step > 0)"),
    ('expr = "block_q == 64 or head_dim <= 64"', "expr = 3",
     "{p}:6: constraints[0].expr: a string expression is required"),
    ('expr = "block_q == 64 or head_dim <= 64"', 'expr = "block_q == 64"\nwhen = 1',
     "{p}:7: constraints[0]: unknown field(s) ['when'] (a constraint has expr and why)"),
    ('expr = "block_q == 64 or head_dim <= 64"', 'expr = "block_q =="',
     "{p}:6: constraints[0].expr: not an expression (invalid syntax): 'block_q =='"),
    ('kernel = "ranker_attention"', "kernel = 3", "{p}:1: kernel: a kernel name string is required"),
    ('name = "b"', "name = 3", "{p}:7: buckets[0]: needs a name and a problem table"),
])
def test_each_bad_field_is_named_exactly(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(SpaceError, match=_exact(tmp_path, message)):
        load(tmp_path, GOOD.replace(old, new))


def test_a_space_of_another_kernel_is_named(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(GOOD)
    assert load_space(p, TUN, FIELDS, for_kernel="ranker_attention").kernel == "ranker_attention"
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}:1: kernel = 'ranker_attention', but the kernel swept "
                                                          "is 'drafter_wide'")):
        load_space(p, TUN, FIELDS, for_kernel="drafter_wide")


def test_an_unreadable_space_says_why(tmp_path):
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}: cannot read (No such file or directory)")):
        load_space(tmp_path / "s.toml", TUN, FIELDS)


def test_a_range_with_a_step_and_the_why_of_a_constraint(tmp_path):
    s = load(tmp_path, GOOD.replace("range = [2, 4]", "range = [2, 4, 2]").replace(
        'expr = "block_q == 64 or head_dim <= 64"', 'expr = "block_q == 64 or head_dim <= 64"\nwhy = "measured"'))
    assert s.params["num_stages"] == [2, 4] and s.params["block_q"] == [64, 128]
    [c] = s.constraints
    assert (c.expr, c.why, c.where) == ("block_q == 64 or head_dim <= 64", "measured", f"{tmp_path / 's.toml'}:6")
    assert load(tmp_path, GOOD).constraints[0].why == ""
    assert load(tmp_path, GOOD.replace("range = [2, 4]", "range = [3, 3]")).params["num_stages"] == [3]


def test_a_constraint_that_raises_names_itself_and_the_values_it_used(tmp_path):
    text = GOOD.replace('expr = "block_q == 64 or head_dim <= 64"',
                        'expr = "block_q // (head_dim - 128) > 0 or block_q == 64"')
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}:6: constraint 'block_q // (head_dim - 128) > 0 or "
                                                          "block_q == 64' raised ZeroDivisionError (integer division "
                                                          "or modulo by zero) at head_dim=128, block_q=64")):
        load(tmp_path, text)


def test_a_bucket_is_found_by_name_and_a_missing_one_lists_the_others(tmp_path):
    s = load(tmp_path, GOOD)
    assert s.bucket("b").problem["seq_len"] == 512 and s.bucket("b").where == f"{tmp_path / 's.toml'}:7"
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}: no bucket named 'c' (have ['b'])")):
        s.bucket("c")


TWO = GOOD + '''[[constraints]]
expr = "num_stages == 9"
[[buckets]]
name = "c"
problem = { batch = 1, seq_len = 512, q_heads = 1, kv_heads = 1, head_dim = 64 }
'''


@pytest.mark.parametrize(("text", "message"), [
    (TWO, "{p}:11: constraints[1].expr: excludes every config ('num_stages == 9')"),
    (TWO.replace("num_stages == 9", "num_stages == 2").replace("head_dim = 64 }", "head_dim = 64, colour = 1 }"),
     "{p}:12: buckets[1].problem: unknown field(s) ['colour']"),
    (TWO.replace("num_stages == 9", "block_q == 128"),
     "{p}: the constraints leave no config for problem {{'batch': 1, 'seq_len': 512, 'q_heads': 1, 'kv_heads': 1, "
     "'head_dim': 128}}"),
    ("\n" + GOOD.replace("block_q = [64, 128]", "block_qq = [64]"),
     "{p}:4: params.block_qq: unknown parameter (kernel 'ranker_attention' tunes " + str(sorted(TUN)) + ")"),
    (GOOD.replace("num_stages = { range = [2, 4] }\n", "").replace("block_q = [64, 128]", ""),
     "{p}: params: a [params] table with at least one parameter is required"),
    ('params = 3\n' + GOOD[GOOD.index("[[constraints]]"):].replace('kernel = "ranker_attention"', ""),
     "{p}: kernel: a kernel name string is required"),  # no "kernel =" line to point at
    (GOOD.replace('kernel = "ranker_attention"\n', 'kernel = "ranker_attention"\nconstraints = 3\n').replace(
        '[[constraints]]\nexpr = "block_q == 64 or head_dim <= 64"\n', ""),
     "{p}: constraints: expected [[constraints]] tables"),
    (GOOD + '[[buckets]]\nname = "b"\nproblem = { head_dim = 64 }\n',  # named at its line, as every other error
     "{p}:10: buckets[1].name: 'b' is the name of buckets[0] too; two buckets share a name"),
])
def test_the_second_of_each_thing_and_the_whole_space_are_named(tmp_path, text, message):
    with pytest.raises(SpaceError, match=_exact(tmp_path, message)):
        load(tmp_path, text)


def test_a_params_field_that_is_not_a_table(tmp_path):
    text = 'kernel = "ranker_attention"\nparams = 3\n'
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}: params: a [params] table with at least one "
                                                          "parameter is required")):
        load(tmp_path, text)


def test_inline_buckets_are_named_by_file_and_index(tmp_path):
    text = GOOD[:GOOD.index("[[buckets]]")].replace(
        "[params]", 'buckets = [{ name = "b", problem = { head_dim = 64 } }, { name = 3 }]\n[params]')
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}: buckets[1]: needs a name and a problem table")):
        load(tmp_path, text)


def test_a_space_without_constraints_or_buckets_and_a_bucket_with_bounds(tmp_path):
    bare = 'kernel = "ranker_attention"\n[params]\nblock_q = [64, 128]\n'
    s = load(tmp_path, bare)
    assert s.constraints == () and s.buckets == ()
    s = load(tmp_path, GOOD.replace("head_dim = 128 }", "head_dim = 128 }\nbounds = { candidates = 64 }"))
    assert s.bucket("b").bounds == {"candidates": 64}


def test_a_constraint_on_a_problem_field_no_bucket_gives_is_judged_later(tmp_path):
    text = 'kernel = "ranker_attention"\n[params]\nblock_q = [64, 128]\n[[constraints]]\nexpr = "block_q <= seq_len"\n'
    assert load(tmp_path, text).constraints[0].expr == "block_q <= seq_len"  # no bucket: nothing to judge yet
    with_bucket = text + '[[buckets]]\nname = "b"\nproblem = { head_dim = 64 }\n'
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}:6: bucket 'b' gives no 'seq_len', which a constraint "
                                                          "reads")):
        load(tmp_path, with_bucket)
    given = with_bucket.replace("head_dim = 64 }", "head_dim = 64, seq_len = 100 }")
    assert [c["block_q"] for c in load(tmp_path, given).configs({"seq_len": 100})] == [64]


def test_a_second_constraint_that_raises_is_named_by_its_own_line(tmp_path):
    text = TWO.replace("num_stages == 9", "num_stages // (head_dim - 64) >= 0")
    with pytest.raises(SpaceError, match=_exact(tmp_path, "{p}:11: constraint 'num_stages // (head_dim - 64) >= 0' "
                                                          "raised ZeroDivisionError (integer division or modulo by "
                                                          "zero) at head_dim=64, num_stages=2")):
        load(tmp_path, text)


def test_a_range_is_counted_before_it_is_built(tmp_path):
    """A typo'd bound refuses in one line instead of filling memory (it ended in MemoryError)."""
    with pytest.raises(SpaceError, match=r"s\.toml:4: params\.num_stages: range \[0, 1000000000\] holds "
                                         r"1000000001 values; a parameter takes at most 10000"):
        load(tmp_path, GOOD.replace("range = [2, 4]", "range = [0, 1000000000]"))


@pytest.mark.parametrize("expr", ["[0] * 100000000 != []", "100000000 * (0,) != ()", "'x' * 100000000 != ''",
                                  "('%0800000000d' % block_q) != ''", "'%s' % (1,) != ''"])
def test_a_constraint_may_not_repeat_or_format_a_sequence(tmp_path, expr):
    op = r"\*" if "*" in expr else "%"
    with pytest.raises(SpaceError, match=rf"s\.toml:6: constraints\[0\]\.expr: '{op}' of a string or a sequence "
                                         rf".*; it takes numbers only"):
        load(tmp_path, GOOD.replace("block_q == 64 or head_dim <= 64", expr))


def test_a_space_too_large_to_prove_loads_at_once_and_a_range_past_ssize_t_is_refused(tmp_path):
    """10**8 configs whose one constraint holds only at the very end: the walk that proves it satisfiable never
    ended; past 10**6 configs it is not walked at load (a sampler judges configs as it draws them)."""
    import time

    big = GOOD.replace("block_q = [64, 128]", "block_q = { range = [1, 10000] }").replace(
        "num_stages = { range = [2, 4] }", "num_stages = { range = [1, 10000] }").replace(
        "block_q == 64 or head_dim <= 64", "block_q == 10000 and num_stages == 10000")
    started = time.monotonic()
    space = load(tmp_path, big)
    assert time.monotonic() - started < 5 and len(space.params["block_q"]) == len(space.params["num_stages"]) == 10000
    assert space.allows({"block_q": 10000, "num_stages": 10000}, {"head_dim": 128})
    with pytest.raises(SpaceError, match=r"holds 18446744073709551616 values; a parameter takes at most 10000"):
        load(tmp_path, GOOD.replace("range = [2, 4]", "range = [0, 18446744073709551615]"))


@pytest.mark.parametrize(("expr", "value", "raised", "numbers"), [
    ("cap_method * 100000000 != ''", "tanh", r"'\*' multiplies numbers only", "block_q * 2 == 128"),
    ("cap_method % block_q != ''", "%0800000000d", "'%' takes numbers only", "block_q % 64 == 0"),
])
def test_a_string_parameter_repeated_or_formatted_fails_at_once_naming_it(tmp_path, expr, value, raised, numbers):
    """A name's value is only known when the constraint runs: '*' and '%' then refuse anything but numbers
    ('%0800000000d' % x through a string-valued field asked for 800 MB)."""
    with pytest.raises(SpaceError, match=rf"s\.toml:6: constraint .* raised TypeError \({raised}, not str and "
                                         rf"int\) at cap_method='{re.escape(value)}'"):
        load(tmp_path, GOOD.replace("block_q == 64 or head_dim <= 64", expr)
             .replace("head_dim = 128 }", f"head_dim = 128, cap_method = '{value}' }}"))
    assert list(load(tmp_path, GOOD.replace("block_q == 64", numbers)).configs({"head_dim": 128}))


def test_a_space_that_is_not_utf8_or_whose_bounds_are_no_table_is_named(tmp_path):
    p = tmp_path / "s.toml"
    p.write_bytes(GOOD.encode() + b"# \xff\n")
    with pytest.raises(SpaceError, match=r"s\.toml: not a TOML text file \(byte \d+ is not UTF-8\)"):
        load_space(p, TUN, FIELDS)
    with pytest.raises(SpaceError, match=r"s\.toml:7: buckets\[0\]\.bounds: 'x' is not a table"):
        load(tmp_path, GOOD + 'bounds = "x"\n')
