"""tools/migrate_because.py hoists `{=…}` template fields into `let:` mechanically, keeps comments,
shares one binding between languages, and is re-runnable (the lead re-runs it after merging)."""

from __future__ import annotations

import importlib.util

import yaml
from conftest import ROOT

spec = importlib.util.spec_from_file_location("migrate_because", ROOT / "tools" / "migrate_because.py")
migrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(migrate)

SOURCE = """\
# a comment that must stay
- id: a.one
  title: {en: t, zh: t}
  source: {url: https://example.com}
  stage: checks
  then:
    - warn: {severity: info}   # trailing comment
  because:
    en: "x {=weights_gib(model.id, 'bf16'):.1f} GiB, {=2 * gib(48)} and {model.id}"
    zh: "权重 {=weights_gib(model.id, 'bf16'):.1f} GiB"
- id: a.two
  title: {en: t, zh: t}
  source: {url: https://example.com}
  stage: checks
  let:
    keep: "1 + 1"
  then:
    - warn: {}
  because: {en: "{keep} {=catalog('cpus', 'EPYC 9254', 'cores')}", zh: "{keep} {=catalog('cpus', 'EPYC 9254', 'cores')}"}
"""


def test_hoists_shares_and_keeps_comments():
    out, n = migrate.migrate_text(SOURCE)
    assert n == 5
    assert "{=" not in out
    assert "# a comment that must stay" in out and "# trailing comment" in out
    data = yaml.safe_load(out)
    one, two = data
    assert one["let"] == {"weights_gib_bf16": "weights_gib(model.id, 'bf16')", "n2_gib_48": "2 * gib(48)"}
    assert one["because"]["en"] == "x {weights_gib_bf16:.1f} GiB, {n2_gib_48} and {model.id}"
    assert one["because"]["zh"] == "权重 {weights_gib_bf16:.1f} GiB"
    assert list(two["let"]) == ["keep", "epyc_9254_cores"]       # appended after the existing block
    assert two["because"]["en"] == "{keep} {epyc_9254_cores}"
    migrate._verify(SOURCE, out, "<test>")
    again, n2 = migrate.migrate_text(out)
    assert (again, n2) == (out, 0)


def test_shipped_rules_are_migrated():
    for path in sorted((ROOT / "rules").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert migrate.migrate_text(text, str(path)) == (text, 0), path
