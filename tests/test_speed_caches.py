"""The speed mechanisms of #14 give the same results as the slow path: the compiled rule base and
catalog caches (hit = same content, any change = miss), domain functions remembered per run
(same value, same recorded details, only where safe), expressions rebuilt after pickling, and
engines reused between runs of the same rules."""

from __future__ import annotations

import pickle

import pytest
from conftest import EXAMPLES

from servewise.engine.common import rulecache
from servewise.engine.lang.rulebase import RuleBase, RuleLoadError, forget_loaded, iter_exprs, load_rules

RULE = """- id: speed.check
  title: {en: speed check, zh: 速度检查}
  source: {guideline: G-SLA-001}
  stage: checks
  when: ["performance.tpot_ms > LIMIT"]
  then: [{warn: {severity: info}}]
  because: {en: "tpot above LIMIT", zh: "tpot 高于 LIMIT"}
  tests:
    - name: fires
      facts: {performance.tpot_ms: 500}
      expect: {warns: true, says: [tpot above]}
    - name: quiet
      facts: {performance.tpot_ms: 0}
      expect: {warns: false}
"""


def compiled(folder):
    return sorted(folder.glob("compiled-*.pickle")) if folder.exists() else []


def shape(rb: RuleBase) -> list[tuple]:
    return [(r.id, r.file, r.line, r.stage, r.load_order, r.names, [e.source for e in iter_exprs(r)], r.raw)
            for r in rb.rules]


def test_compiled_rule_base_hit_is_the_same_rule_base(cache, monkeypatch):
    first = load_rules()
    assert len(compiled(cache)) == 1
    monkeypatch.setattr("servewise.engine.lang.rulebase._load_rules",
                        lambda *a: pytest.fail("a hit must not load the rule files again"))
    forget_loaded()  # the cache file, not this process's memory of the load
    second = load_rules()
    assert shape(second) == shape(first) and second.knowledge_hash == first.knowledge_hash
    assert second is not first and second.engines == {}


def test_cached_expressions_evaluate_like_fresh_ones(cache):
    fresh = load_rules()
    forget_loaded()
    cached = load_rules()
    values = {"performance.tpot_ms": 40.0, "sla.tpot_ms": 50.0}
    checked = 0
    for a, b in zip(fresh.rules, cached.rules, strict=True):
        for ea, eb in zip(iter_exprs(a), iter_exprs(b), strict=True):
            assert eb._fn is None  # rebuilt at the first evaluation
            if set(ea.names) <= set(values) and not ea.functions:
                assert eb.evaluate_with(values) == ea.evaluate_with(values)
                assert eb._fn is not None
                checked += 1
    assert checked > 0


def test_a_changed_rules_dir_file_misses_the_compiled_cache(cache, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "10"), encoding="utf-8")
    a = load_rules([extra])
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "20"), encoding="utf-8")
    b = load_rules([extra])
    assert a.by_id("speed.check").when[0].source.endswith("10")
    assert b.by_id("speed.check").when[0].source.endswith("20")
    assert len(compiled(cache)) == 3  # and the built-in rules alone, which both reused
    forget_loaded()
    c = load_rules([extra])  # unchanged now: a hit
    assert c.by_id("speed.check").when[0].source.endswith("20") and len(compiled(cache)) == 3


def test_an_added_rules_dir_file_misses_the_compiled_cache(cache, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "10"), encoding="utf-8")
    a = load_rules([extra])
    (extra / "s.yaml").write_text(RULE.replace("LIMIT", "30").replace("speed.check", "s.check"),
                                  encoding="utf-8")
    b = load_rules([extra])
    assert len(b.rules) == len(a.rules) + 1 and b.by_id("s.check")


def test_the_compiled_key_follows_engine_code_working_folder_and_options(cache, tmp_path, monkeypatch):
    from servewise.engine.lang.rulebase import _compiled_key

    base = _compiled_key(None, True, False)
    assert base is not None and base == _compiled_key(None, True, False)
    assert _compiled_key(None, True, True) != base
    monkeypatch.chdir(tmp_path)  # file names are shown relative to the working folder
    assert _compiled_key(None, True, False) != base
    monkeypatch.undo()
    sources = rulecache.engine_sources()
    monkeypatch.setattr(rulecache, "engine_sources", lambda: sources + [b"changed.py\0# edited"])
    assert _compiled_key(None, True, False) != base


def test_no_compiled_cache_when_disabled(tmp_path, monkeypatch):
    from servewise.engine.lang.rulebase import _compiled_key

    monkeypatch.setenv("SERVEWISE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SERVEWISE_NO_CACHE", "1")
    assert _compiled_key(None, True, False) is None
    assert load_rules().rules and not list(tmp_path.glob("*.pickle"))


def test_a_process_loads_the_same_rules_once(cache, tmp_path, monkeypatch):
    """The same files in the same cache folder: the same rule base (its engines kept for the next
    run), without reading the cache again; an edited file, another cache folder or caching off:
    loaded again."""
    first = load_rules()
    monkeypatch.setattr(rulecache, "read", lambda *a: pytest.fail("a process's own load is not read again"))
    assert load_rules() is first
    monkeypatch.undo()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "10"), encoding="utf-8")
    a = load_rules([extra])
    assert load_rules([extra]) is a
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "20"), encoding="utf-8")
    assert load_rules([extra]) is not a
    monkeypatch.setenv("SERVEWISE_CACHE_DIR", str(tmp_path / "other"))
    assert load_rules() is not first
    monkeypatch.setenv("SERVEWISE_NO_CACHE", "1")
    assert load_rules() is not load_rules()


def test_a_rules_dir_load_reuses_the_built_in_rules_compiled_alone(cache, tmp_path, monkeypatch):
    """The built-in files are compiled once (as loaded alone) and shared by loads with a folder;
    the rule base is the one compiling every file gives: same rules, lines, order and plan."""
    from servewise.engine.app.plan import plan_file

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("LIMIT", "10"), encoding="utf-8")
    shipped = load_rules()
    reused = load_rules([extra])
    assert all(a is b for a, b in zip(shipped.rules, reused.rules, strict=False))
    assert len(reused.rules) == len(shipped.rules) + 1 and reused.files[:len(shipped.files)] == shipped.files
    monkeypatch.setenv("SERVEWISE_NO_CACHE", "1")  # every file compiled in this load
    fresh = load_rules([extra])
    assert not any(a is b for a, b in zip(shipped.rules, fresh.rules, strict=False))
    assert shape(fresh) == shape(reused) and fresh.knowledge_hash == reused.knowledge_hash
    example = EXAMPLES / "chat-8b-small.yaml"
    assert plan_file(example, fresh).plan == plan_file(example, reused).plan
    # a folder whose rule repeats a built-in id is still refused, as without the reuse
    monkeypatch.delenv("SERVEWISE_NO_CACHE")
    (extra / "r.yaml").write_text(RULE.replace("speed.check", shipped.rules[0].id), encoding="utf-8")
    with pytest.raises(RuleLoadError, match="duplicate rule id"):
        load_rules([extra])


def test_lint_of_some_files_finds_what_linting_all_finds_in_them(tmp_path):
    from servewise.engine.lang.rulelint import lint

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "r.yaml").write_text(RULE.replace("performance.tpot_ms > LIMIT", "performance.tpot_m > 10 * 1.15"),
                                  encoding="utf-8")
    rb = load_rules([extra], semantic=False)
    mine = {r.file for r in rb.rules if not r.builtin}
    every = [f for f in lint(rb) if f.file in mine]
    assert every and lint(rb, files=mine) == every
    assert [f for f in lint(rb, loading=True) if f.file in mine] == lint(rb, loading=True, files=mine)


def test_catalog_cache_hit_and_miss(cache, tmp_path, monkeypatch):
    from servewise.engine.domain import catalog as cat

    cat.load_catalog.cache_clear()
    try:
        first = cat.load_catalog()
        assert len(list(cache.glob("catalog-*.pickle"))) == 1
        cat.load_catalog.cache_clear()
        with monkeypatch.context() as m:
            m.setattr(cat, "build_catalog", lambda paths: pytest.fail("a hit must not read YAML"))
            second = cat.load_catalog()
        assert {k: t.entries for k, t in second.tables.items()} == {k: t.entries for k, t in first.tables.items()}
        assert second.gpu("h200")["id"] == first.gpu("h200")["id"]
        # a changed catalog file is a new key
        copy = tmp_path / "catalog"
        copy.mkdir()
        for p in cat.CATALOG_DIR.glob("*.yaml"):
            (copy / p.name).write_bytes(p.read_bytes())
        with monkeypatch.context() as m:
            m.setattr(cat, "CATALOG_DIR", copy)
            (copy / "gpus.yaml").write_text((copy / "gpus.yaml").read_text(encoding="utf-8") + "\n# edited\n",
                                            encoding="utf-8")
            cat.load_catalog.cache_clear()
            assert cat.load_catalog().gpu("h200")["id"] == first.gpu("h200")["id"]
        assert len(list(cache.glob("catalog-*.pickle"))) == 2
    finally:
        cat.load_catalog.cache_clear()


def test_expressions_pickle_without_closures():
    from servewise.engine.lang.expr import compile_expr

    e = compile_expr("max(a, b) * 2 + (1 if c else 0)")
    again = pickle.loads(pickle.dumps(e))
    assert again._fn is None and again.source == e.source and again.names == e.names
    for values in ({"a": 1, "b": 3, "c": True}, {"a": 5.5, "b": 2, "c": False}):
        assert again.evaluate_with(values) == e.evaluate_with(values)


# ------------------------------------------------------------------------ domain functions remembered

def test_memoised_function_same_value_and_details():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.functions import RunContext, memoised, reset_context, use_context

    calls = []

    def f(x, y):
        calls.append((x, y))
        from servewise.engine.domain.functions import note_detail

        note_detail({"function": "f", "x": x})
        return x * 10 + y

    g = memoised("f", f)
    ctx = RunContext(load_catalog())
    token = use_context(ctx)
    try:
        ctx.details = []
        assert g(1, 2) == 12 and ctx.details == [{"function": "f", "x": 1}]
        ctx.details = []
        assert g(1, 2) == 12 and ctx.details == [{"function": "f", "x": 1}]  # replayed, not recomputed
        assert calls == [(1, 2)]
        assert g(1.0, 2) == 12.0 and calls[-1] == (1.0, 2)  # 1.0 is not 1: computed again
        assert g(2, 2) == 22 and len(calls) == 3
    finally:
        reset_context(token)
    token = use_context(RunContext(load_catalog()))  # another run remembers nothing
    try:
        g(1, 2)
        assert len(calls) == 4
    finally:
        reset_context(token)


def test_memoised_function_keeps_no_lists_unhashable_args_or_errors():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.functions import RunContext, memoised, reset_context, use_context

    calls = []

    def listy(x):
        calls.append(x)
        if x == "boom":
            raise ValueError("boom")
        return [x] if isinstance(x, str) else len(x)

    g = memoised("listy", listy)
    token = use_context(RunContext(load_catalog()))
    try:
        a, b = g("a"), g("a")
        assert a == b == ["a"] and a is not b  # a list result is computed each time
        assert g([1, 2]) == 2 and g([1, 2]) == 2  # an unhashable argument: computed each time
        for _ in range(2):
            with pytest.raises(ValueError):
                g("boom")
        assert calls == ["a", "a", [1, 2], [1, 2], "boom", "boom"]
    finally:
        reset_context(token)


def test_registered_domain_functions_are_memoised_and_record_reads():
    from servewise.engine.domain.functions import FUNCTIONS, NOT_MEMOISED

    for name, fn in FUNCTIONS.items():
        inner = getattr(fn, "__wrapped__", fn) if getattr(fn, "records_reads", False) else fn
        assert getattr(inner, "memoised", False) == (name not in NOT_MEMOISED), name
    assert getattr(FUNCTIONS["estimate_pp"], "records_reads", False)


# ------------------------------------------------------------------------ engines reused

def test_reused_engine_gives_the_same_plan_as_a_new_one():
    from servewise.cli.render import to_json
    from servewise.engine.app.plan import plan_file

    rb = load_rules()
    path = EXAMPLES / "infeasible-target.yaml"
    first = to_json(plan_file(path, rb).plan)
    assert sum(len(v) for v in rb.engines.values()) == 1  # given back after the run
    again = to_json(plan_file(path, rb).plan)
    assert again == first and sum(len(v) for v in rb.engines.values()) == 1
    other = to_json(plan_file(EXAMPLES / "edge-video.yaml", rb).plan)  # another workload in between
    assert to_json(plan_file(path, rb).plan) == first and other != first


def test_a_runner_nobody_holds_gives_its_engine_back():
    import gc

    from servewise.engine.runtime.runner import Runner

    rb = load_rules()
    runner = Runner(rb)
    engine = runner.engine
    assert sum(len(v) for v in rb.engines.values()) == 0
    del runner
    gc.collect()
    pooled = [e for v in rb.engines.values() for e in v]
    assert pooled == [engine]
    assert Runner(rb).engine is engine  # the next runner reuses it
