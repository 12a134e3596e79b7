"""A config in one line: what differs from the kernel's defaults."""

from kerneltune.report.configs import config_text


def test_only_the_fields_that_differ_and_every_field_without_defaults():
    defaults = {"block_q": 64, "persistent": False}
    assert config_text({"block_q": 64, "persistent": True, "extra": 1}, defaults) == "persistent=True extra=1"
    assert config_text({"block_q": 64, "persistent": False}, defaults) == "defaults"
    assert config_text({"mode": "good", "work": 1}, {}) == "mode=good work=1"
