"""#41 "logic once": a `because` template chooses each language's words from one value computed
in `let:` (engine/lang/template.py), and never computes itself."""

from __future__ import annotations

import pytest

from servewise.engine.lang.expr import ExprError
from servewise.engine.lang.template import make_template
from servewise.engine.runtime.justify import render
from servewise.engine.runtime.resolve import NotReady


def _render(text: str, lang: str = "en", **values) -> str:
    def resolve(name: str):
        if name in values:
            return values[name]
        raise NotReady(name)
    return render(make_template(text), resolve, lang)


FITS = "{fits, select, true {16-bit fits} other {16-bit does not fit ({left} GiB short)}}"


def test_select_on_a_yes_no_value():
    assert _render(FITS, fits=True, left=3) == "16-bit fits"
    assert _render(FITS, fits=False, left=3.5) == "16-bit does not fit (3.5 GiB short)"
    assert _render(FITS, fits=None, left=3) == "16-bit does not fit (3 GiB short)"  # unset: other


def test_select_on_a_text_or_number_and_nested_choices():
    tier = "{tier, select, <=13B {one A10G} 13-34B {one L40S} other {{n, select, 0 {none} other {{n} × H200}}}}"
    assert _render(tier, tier="<=13B") == "one A10G"
    assert _render(tier, tier="13-34B") == "one L40S"
    assert _render(tier, tier=">70B", n=0) == "none"
    assert _render(tier, tier=">70B", n=4.0) == "4 × H200"  # a whole float selects as 4


def test_optional_clause_and_format_spec_inside_a_case():
    t = "{n} servers{spines, select, 0 {} other {, joined by {spines} spine switches ({gbs:.1f} GB/s)}}."
    assert _render(t, n=4, spines=0) == "4 servers."
    assert _render(t, n=4, spines=2, gbs=12.345) == "4 servers, joined by 2 spine switches (12.3 GB/s)."


def test_plural_by_language():
    t = "{n, plural, =0 {no server} one {one server} other {{n} servers}}"
    assert [_render(t, n=v) for v in (0, 1, 3)] == ["no server", "one server", "3 servers"]
    zh = "{n, plural, =0 {没有服务器} other {{n} 台服务器}}"
    assert [_render(zh, "zh", n=v) for v in (0, 1)] == ["没有服务器", "1 台服务器"]
    # a Chinese text with a `one` case still takes `other` for 1: Chinese has no singular form
    assert _render("{n, plural, one {a} other {b}}", "zh", n=1) == "b"


def test_unknown_value_shows_a_question_mark():
    assert _render("x {missing, select, true {a} other {b}} y") == "x ? y"
    assert _render(FITS, fits=False) == "16-bit does not fit (? GiB short)"


def test_names_include_every_case_so_the_values_are_kept_when_the_rule_fires():
    t = make_template("{a} {b, select, true {{c:.1f}} other {{d, plural, one {x} other {{e}}}}}")
    assert t.names == ("a", "b", "c", "d", "e")
    assert t.choices == 2 and not t.exprs


@pytest.mark.parametrize(("text", "message"), [
    ("{fits, select, true {a}}", "has no 'other {…}' case"),
    ("{fits, select, true {a} other {b}", "not closed"),
    ("{fits, select, true {a} true {b} other {c}}", "case 'true' of 'fits' is given twice"),
    ("{n, plural, few {a} other {b}}", "plural case 'few' is not =N, one or other"),
    ("{fits, choose, true {a} other {b}}", "malformed placeholder"),
    ("{fits, select, true a other {b}}", "expected a case 'key {text}'"),
    ("a } b", "malformed placeholder"),
    ("{x:999999999}", "format width 999999999"),
    ("{a, select, other {{b, select, other {{c, select, other {{d, select, other {{e, select, other {}}}}}}}}}}",
     "nested more than 4 deep"),
])
def test_malformed_templates_are_load_errors(text, message):
    with pytest.raises(ExprError, match=None) as err:
        make_template(text)
    assert message in str(err.value), str(err.value)


def test_a_rule_chooses_its_words_from_one_binding(cli, tmp_path):
    """End to end: one `let:` value, each language's words chosen in its own `because`."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "my.yaml").write_text("""\
- id: my.big-model
  title: {en: t, zh: t}
  source: {url: https://example.com}
  stage: checks
  constants:
    large_b: {value: 10, source: "https://example.com"}
  when: ["model.total_params_b > large_b"]
  let:
    huge: "model.total_params_b > 100"
  then:
    - warn: {severity: info}
  because:
    en: "{model.total_params_b} B parameters{huge, select, true {, more than one server holds} other {}}."
    zh: "{model.total_params_b}B 参数{huge, select, true {，需多台服务器} other {}}。"
  tests:
    - name: 405B says so
      facts: {model.total_params_b: 405}
      expect: {warns: true, says: ["405 B parameters, more than one server holds."]}
    - name: 70B has no clause
      facts: {model.total_params_b: 70}
      expect: {warns: true, says: ["70 B parameters."]}
    - name: small
      facts: {model.total_params_b: 7}
      expect: {fires: false}
""", encoding="utf-8")
    result = cli("rules", "test", str(d))
    assert result.exit_code == 0, result.output
    lint = cli("rules", "lint", str(d))
    assert lint.exit_code == 0 and "warning" not in lint.output, lint.output


def test_a_ranked_text_reads_the_rules_bindings_for_each_item(tmp_path):
    """select's ranked_because chooses its words from `let:` values computed per ranked item (what
    rules/selection/select.yaml's two `{=…}` fields need to become bindings)."""
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.functions import RunContext
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime.runner import Origin, Runner

    (tmp_path / "my.yaml").write_text("""
- id: my.cheapest
  title: {en: t, zh: t}
  source: {url: https://example.com}
  stage: selection
  let:
    tie: "round(candidate.tco_cny, -3) == round(chosen.tco_cny, -3)"
    more_pct: "round(100 * (candidate.tco_cny - chosen.tco_cny) / chosen.tco_cny, 1)"
  then:
    - select:
        kind: candidate
        minimize: ["round(candidate.tco_cny, -3)"]
        as: chosen
        ranked_because:
          en: "{candidate.id}: {tie, select, true {a tie with} other {{more_pct}% more than}} {chosen.id}"
          zh: "{candidate.id}：{tie, select, true {与 {chosen.id} 持平} other {比 {chosen.id} 高 {more_pct}%}}"
  because: {en: "cheapest", zh: "最便宜"}
""", encoding="utf-8")
    runner = Runner(load_rules([tmp_path], builtin=False, semantic=False))
    for iid, tco in (("a", 1000.0), ("b", 2500.0), ("c", 1400.0)):
        runner.store.create_item("candidate", iid, {"tco_cny": tco}, 0)
    mem = runner.run({"mode": ("online", Origin("input", "test"))}, RunContext(load_catalog()))
    said = {r["option"]: r["because"] for r in mem.rejections}
    assert said["b"] == {"en": "b: 150% more than a", "zh": "b：比 a 高 150%"}
    assert said["c"]["en"] == "c: a tie with a" and said["c"]["zh"] == "c：与 a 持平"
