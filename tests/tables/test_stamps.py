"""The stamps' own rules: device kinds, the kernel source hash, the time stamp."""

import hashlib
import re
import time
from datetime import UTC, datetime

import pytest

from kerneltune.tables.stamps import device_kind, now_stamp, source_hash


@pytest.mark.parametrize(("gpu", "kind"), [
    ("NVIDIA H200", "nvidia-h200"), ("AMD Instinct MI300X", "amd-instinct-mi300x"),
    ("  NVIDIA H100 80GB HBM3 ", "nvidia-h100-80gb-hbm3"), ("--", "unknown"),
])
def test_device_kind(gpu, kind):
    assert device_kind(gpu) == kind


def test_the_source_hash_covers_each_files_name_and_bytes_in_order(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    want = hashlib.sha256(b"a.py" + b"x = 1\n" + b"b.py" + b"y = 2\n").hexdigest()[:16]
    assert source_hash([a, b]) == want and len(want) == 16
    assert source_hash([b, a]) != want
    b.write_text("y = 3\n")
    assert source_hash([a, b]) != want


def test_now_stamp_is_utc_to_the_second(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # a machine whose local time is not UTC
    time.tzset()
    try:
        stamp = now_stamp()
    finally:
        monkeypatch.undo()
        time.tzset()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - then).total_seconds()) < 5
