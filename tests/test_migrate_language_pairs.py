"""tools/migrate_language_pairs.py turns `x_en` / `x_zh` bindings into one binding per decision and
the words of each language into choices, rendering the same text (#41 logic once)."""

from __future__ import annotations

import importlib.util

import yaml
from conftest import ROOT

spec = importlib.util.spec_from_file_location("migrate_language_pairs", ROOT / "tools" / "migrate_language_pairs.py")
migrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(migrate)

SOURCE = """\
# a comment that must stay
- id: my.pairs
  title: {en: t, zh: t}
  source: {url: https://example.com}
  stage: checks
  when: ["model.total_params_b > 0"]
  let:
    keep: "model.total_params_b * 2"
    size_en: "('a huge model of ' + text(keep) + ' GB' if model.total_params_b > 100 else 'a small model')"
    mode_en: "'batch' if mode == 'offline' else ('edge' if mode == 'edge' else 'online')"
    size_zh: "('超大模型（' + text(keep) + ' GB）' if model.total_params_b > 100 else '小模型')"
    mode_zh: "'离线' if mode == 'offline' else ('边缘' if mode == 'edge' else '在线')"
  then:
    - warn: {severity: info}   # trailing comment
  because:
    en: "{size_en}, {mode_en}."
    zh: "{size_zh}，{mode_zh}。"
  tests:
    - {name: big offline, facts: {model.total_params_b: 405, mode: offline}, expect: {warns: true, says: ["a huge model of 810 GB, batch."]}}
    - {name: small edge, facts: {model.total_params_b: 7, mode: edge}, expect: {warns: true, says: ["a small model, edge."]}}
    - {name: online, facts: {model.total_params_b: 7, mode: online}, expect: {warns: true, says: ["a small model, online."]}}
    - {name: quiet, facts: {model.total_params_b: 0, mode: online}, expect: {fires: false}}
"""


def test_pairs_become_one_value_and_choices(tmp_path, cli):
    out, n, report = migrate.migrate_text(SOURCE)
    assert (n, report) == (4, [])
    assert "# a comment that must stay" in out and "# trailing comment" in out
    rule = yaml.safe_load(out)[0]
    assert rule["let"] == {"keep": "model.total_params_b * 2", "total_params_b_100": "model.total_params_b > 100",
                           "keep_2": "text(keep)"}
    assert rule["because"]["en"] == ("{total_params_b_100, select, true {a huge model of {keep_2} GB} other {a small "
                                     "model}}, {mode, select, offline {batch} edge {edge} other {online}}.")
    assert rule["because"]["zh"].startswith("{total_params_b_100, select, true {超大模型（{keep_2} GB）}")
    d = tmp_path / "mine"
    d.mkdir()
    (d / "my.yaml").write_text(out, encoding="utf-8")
    result = cli("rules", "test", str(d))       # the same cases pass on the rewritten rule
    assert result.exit_code == 0, result.output
    lint = cli("rules", "lint", str(d))
    assert lint.exit_code == 0 and "warning" not in lint.output, lint.output
    assert migrate.migrate_text(out)[:2] == (out, 0)  # re-runnable


def test_what_it_cannot_convert_is_listed_and_left():
    text = SOURCE.replace("model.total_params_b > 100 else 'a small", "model.total_params_b else 'a small")
    out, n, report = migrate.migrate_text(text)
    assert n == 3 and "size_en: \"(" in out
    assert report == ["<text>: my.pairs: left size_en: the condition 'model.total_params_b' is not a yes/no value"]
