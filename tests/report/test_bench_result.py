"""A bench result as the report reads it: rows required, the recorded targets kept, anything else one error
naming the file."""

import json

import pytest

from kerneltune.report.bench_result import read_bench_result


def test_the_recorded_targets_and_where_they_come_from(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"rows": [{"shape": "s"}], "targets": [{"name": "t", "value": 1.0}]}))
    read = read_bench_result(path)
    assert read.targets == [{"name": "t", "value": 1.0}] and read.source == "recorded by the run"
    path.write_text(json.dumps({"rows": []}))
    assert read_bench_result(path).targets == [] and "recorded none" in read_bench_result(path).source


@pytest.mark.parametrize("text", ["not json", "[]", '{"targets": []}', '{"rows": 3}', '{"rows": [], "targets": 1}'])
def test_anything_else_is_one_error_naming_the_file(tmp_path, text):
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"^{path}: not a readable `kerneltune bench` result"):
        read_bench_result(path)


def test_a_binary_or_missing_file_is_the_same_error(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    for path in (tmp_path / "bin.json", tmp_path / "missing.json"):
        with pytest.raises(ValueError, match="not a readable"):
            read_bench_result(path)
