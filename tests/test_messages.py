"""Engine-made sentences come from one en/zh catalog (facts/messages/*.yaml)."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from servewise.engine.common.messages import MessageError, catalog, message, placeholders


def test_every_message_has_both_languages_with_the_same_placeholders():
    for code, texts in catalog().items():
        assert set(texts) == {"en", "zh"}, code
        assert placeholders(texts["en"]) == placeholders(texts["zh"]), code


def test_message_renders_and_rejects_bad_use():
    assert message("select.not-evaluated", "zh", name="candidate.x") == "未评估：candidate.x 未知"
    assert message("yes", "en") == "yes" and message("no", "zh") == "否"
    with pytest.raises(MessageError):
        message("no.such.code", "en")
    with pytest.raises(MessageError):
        message("select.not-evaluated", "en")


def test_engine_python_writes_no_chinese():
    """The wording lives in the catalog: no CJK text in the engine modules this catalog covers."""
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for name in ("runtime/runner.py", "app/plan.py", "app/pools.py", "runtime/actions.py", "runtime/justify.py",
                 "runtime/compiler.py", "runtime/memory.py", "common/text.py"):
        assert not cjk.search((ROOT / "engine" / name).read_text(encoding="utf-8")), name
