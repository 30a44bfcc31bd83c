"""The rule cache (engine/common/rulecache.py): hits give the same rule base, any change misses, and an
unusable cache folder never breaks loading."""

from __future__ import annotations

import os
import shutil

import pytest

from servewise.engine.common import rulecache
from servewise.engine.lang.rulebase import RULES_DIR, RuleLoadError, forget_loaded, load_rules

RULE = """- id: cache.check
  title: {en: cache check, zh: 缓存检查}
  source: {guideline: G-SLA-001}
  stage: checks
  when: ["performance.tpot_ms > LIMIT"]
  then: [{warn: {severity: info}}]
  because: {en: "tpot above LIMIT", zh: "tpot 高于 LIMIT"}
"""


def summary(rb):
    return [(r.id, r.file, r.line, r.load_order, [c.source for c in r.when], r.raw) for r in rb.rules]


def entries(folder):
    return sorted(folder.glob("rules-*.pickle")) if folder.exists() else []


def test_hit_gives_the_same_rule_base(cache, monkeypatch):
    first = load_rules()
    assert len(entries(cache)) == 1
    calls = []
    monkeypatch.setattr("servewise.engine.lang.rulebase._read_rule_file",
                        lambda *a: calls.append(a) or pytest.fail("cache hit must not re-read files"))
    second = load_rules()
    assert not calls and summary(second) == summary(first)
    assert second.knowledge_hash == first.knowledge_hash


def test_a_changed_rules_dir_file_is_a_miss(cache, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "10"), encoding="utf-8")
    load_rules()  # the built-in rules alone: a load with a folder reuses them (their own entry)
    shipped = len(entries(cache))
    a = load_rules([extra])
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "20"), encoding="utf-8")
    b = load_rules([extra])
    assert a.by_id("cache.check").when[0].source.endswith("10")
    assert b.by_id("cache.check").when[0].source.endswith("20")
    assert len(entries(cache)) == shipped + 2


def test_invalid_rules_are_reported_and_not_cached(cache, tmp_path):
    extra = tmp_path / "bad"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("stage: checks", "stage: nowhere"), encoding="utf-8")
    load_rules()
    shipped = entries(cache)  # the built-in rules', which a load with a folder reuses
    for _ in range(2):  # the second load must report it again, not read a cache entry
        with pytest.raises(RuleLoadError):
            load_rules([extra])
    assert entries(cache) == shipped


def test_corrupt_entry_is_ignored_and_replaced(cache):
    load_rules()
    paths = sorted(cache.glob("*.pickle"))  # the parsed rule files and the compiled rule base
    assert len(paths) == 2
    for path in paths:
        path.write_bytes(b"not a pickle")
    forget_loaded()  # (this process remembers what it loaded: the cache files are read again)
    assert load_rules().rules
    assert all(path.read_bytes() != b"not a pickle" for path in paths)


def test_unwritable_or_disabled_cache_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("SERVEWISE_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert load_rules().rules
    monkeypatch.setenv("SERVEWISE_NO_CACHE", "1")
    assert rulecache.cache_dir() is None and load_rules().rules


def test_xdg_location(monkeypatch, tmp_path):
    monkeypatch.delenv("SERVEWISE_CACHE_DIR", raising=False)
    monkeypatch.delenv("SERVEWISE_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert rulecache.cache_dir() == tmp_path / "servewise"


def test_a_changed_builtin_rule_file_is_a_miss(cache, tmp_path, monkeypatch):
    """Built-in rules are keyed by content too (copy the rules folder and edit one file)."""
    copy = tmp_path / "rules"
    shutil.copytree(RULES_DIR, copy)
    first = sorted(copy.rglob("*.yaml"))[0]
    files = [first]
    key1 = rulecache.cache_key([("", False, f.read_bytes()) for f in files], b"")
    first.write_text(first.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    key2 = rulecache.cache_key([("", False, f.read_bytes()) for f in files], b"")
    assert key1 != key2
    assert os.path.exists(first)
