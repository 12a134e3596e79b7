"""Run again, each in a fresh process, every mutant that mutmut did not kill, and write the final verdicts.

mutmut forks a child per mutant from a process that has already imported the tests' modules; JAX's and
Optuna's threads do not survive the fork, so a test that reaches them hangs and mutmut reports a "timeout"
that says nothing about the tests. A fresh ``python -m pytest`` per mutant, on the direct tests of the
mutated module, gives the real verdict. Usage: mutation_rerun.py MUTANTS_DIR MUTMUT_RESULTS OUT [GLOB ...]
(the globs, as given to ``mutmut run``, keep only the mutants they name).
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import fnmatch
import functools
import os
import subprocess
import sys
import tomllib
from pathlib import Path

# The quick tests that judge each mutated module (files under [tool.mutmut]'s tests_dir).
TESTS = {
    ".drafter_wide.indexing.": ["tests/kernels/drafter_wide/test_indexing.py"],
    ".ranker_attention.bounds.": ["tests/kernels/ranker_attention/test_bounds.py",
                                  "tests/kernels/ranker_attention/test_api.py"],
    ".ranker_attention.cap.": ["tests/kernels/ranker_attention/test_cap.py",
                               "tests/kernels/ranker_attention/test_reference.py",
                               "tests/kernels/ranker_attention/test_config.py"],
    ".ranker_attention.reference.": ["tests/kernels/ranker_attention/test_reference.py",
                                     "tests/kernels/ranker_attention/test_cap.py"],
    ".ranker_attention.verify.": ["tests/kernels/ranker_attention/test_verify.py"],
    ".ranker_attention.bench.targets.": ["tests/kernels/ranker_attention/bench/test_targets.py"],
    ".tuning.rekey.": ["tests/tuning/test_rekey.py"],
    ".tuning.verify.": ["tests/tuning/test_verify.py"],
    ".ranker_attention.api.": ["tests/kernels/ranker_attention/test_api.py"],
    ".tables.lookup.": ["tests/tables/test_lookup.py", "tests/tables/test_tables.py"],
    ".tables.": ["tests/tables/"],
    ".measure.": ["tests/test_measure.py"],
    ".tuning.strategies.": ["tests/tuning/test_optuna_samplers.py", "tests/tuning/test_strategies.py"],
    ".tuning.journal.": ["tests/tuning/test_journal.py", "tests/tuning/test_table_writer.py"],
    ".tuning.table_writer.": ["tests/tuning/test_table_writer.py", "tests/tables/test_store_details.py"],
    ".tuning.space.": ["tests/tuning/test_space.py", "tests/tuning/test_large_space.py"],
}


@functools.cache
def pytest_args() -> tuple[str, ...]:
    """mutmut's own pytest arguments ([tool.mutmut] pytest_add_cli_args: the markers and the tests that cannot
    run inside the mutants folder), so both passes judge with the same tests."""
    with (Path(__file__).parents[1] / "pyproject.toml").open("rb") as f:
        return tuple(tomllib.load(f)["tool"]["mutmut"]["pytest_add_cli_args"])


def run_tests(mutants: Path, tests: list[str], mutant: str) -> int | None:
    """pytest's exit code with ``mutant`` switched on ("none": the original code), None past the time limit."""
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", *pytest_args(), *tests]
    try:
        return subprocess.run(cmd, cwd=mutants, env=env, capture_output=True, text=True, timeout=180).returncode
    except subprocess.TimeoutExpired:
        return None


def tests_of(name: str) -> list[str]:
    return next(t for key, t in TESTS.items() if key in name)


def verdict(mutants: Path, name: str) -> str:
    rc = run_tests(mutants, tests_of(name), name)
    return "timeout" if rc is None else {0: "survived", 1: "killed"}.get(rc, f"error (pytest exit {rc})")


def main() -> None:
    mutants, results, out, globs = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
    final = {}
    for line in results.read_text().splitlines():
        if ": " in line:
            name, status = (s.strip() for s in line.split(": ", 1))
            if not globs or any(fnmatch.fnmatchcase(name, g) for g in globs):
                final[name] = status
    again = [n for n, s in final.items() if s != "killed"]
    # A test set that fails on the original code would count every mutant it judges as killed.
    for tests in {tuple(tests_of(n)) for n in again}:
        if run_tests(mutants, list(tests), "none") != 0:
            sys.exit(f"mutation_rerun: {' '.join(tests)} do not pass on the unmutated code in {mutants}")
    with cf.ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        for name, status in zip(again, ex.map(lambda n: verdict(mutants, n), again), strict=True):
            final[name] = f"{status} (rerun; mutmut: {final[name]})"
    out.write_text("".join(f"    {n}: {s}\n" for n, s in final.items()))
    counts = collections.Counter(s.split(" (")[0] for s in final.values())
    print(f"{len(final)} mutants: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
          f"; score {100 * counts['killed'] / len(final):.1f}%")


if __name__ == "__main__":
    main()
