"""The compiled schema check (engine/common/schema_check.py) says what jsonschema says: valid or not,
for every schema servewise reads inputs with, on generated instances and on the keyword corner
cases; and a plan made from a valid workload never imports jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from conftest import EXAMPLES, json_paths, mutate_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servewise.engine.app.inputs import input_defs, workload_schema
from servewise.engine.app.planfile import SCHEMA_FILE as PLAN_SCHEMA
from servewise.engine.common.schema_check import best_error, compiled, equal, jsonschema_validator, unique, valid
from servewise.engine.lang.rulebase import rule_schema

SCHEMAS = {"workload": workload_schema(), "plan": json.loads(PLAN_SCHEMA.read_text(encoding="utf-8")),
           "rule": rule_schema()}


def both(schema: dict, instance) -> tuple[bool, bool]:
    return valid(compiled(schema), instance), jsonschema.Draft202012Validator(schema).is_valid(instance)


def same_errors(schema: dict, instance) -> None:
    """servewise's narrowed validator (it skips subtrees the compiled check finds valid) finds
    jsonschema's errors, and best_match picks the same one."""
    plain, narrowed = jsonschema.Draft202012Validator(schema), jsonschema_validator(schema)

    def described(errors) -> list[tuple]:
        return sorted((list(e.absolute_path), e.message, e.validator) for e in errors)

    assert described(narrowed.iter_errors(instance)) == described(plain.iter_errors(instance))
    mine, theirs = best_error(narrowed, instance), best_error(plain, instance)
    assert (mine and (list(mine.absolute_path), mine.message)) == (theirs and (list(theirs.absolute_path), theirs.message))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_servewise_reads_compiles(name):
    assert compiled(SCHEMAS[name]) is not None


CASES = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, "1", None, 10**40]),
    ({"type": "number"}, [1, 1.5, True, False, "1", float("inf")]),
    ({"type": ["string", "null"]}, ["a", None, 0, []]),
    ({"enum": [1, "a", None]}, [1, 1.0, True, "a", None, False, "b"]),
    ({"enum": [True]}, [True, 1, 1.0]),
    ({"enum": ["x", "y"]}, ["x", "z", 1, None]),
    ({"const": [1, {"a": False}]}, [[1, {"a": False}], [True, {"a": 0}], [1.0, {"a": False}]]),
    ({"uniqueItems": True}, [[1, True], [1, 1.0], [0, False], [[1], [True]], [{"a": 1}, {"a": 1}], [], "x"]),
    ({"minimum": 0, "exclusiveMaximum": 5}, [0, -1, 5, 4.9, True, "x"]),
    ({"exclusiveMinimum": 0, "maximum": 5}, [0, 0.1, 5, 5.1]),
    ({"minLength": 2, "maxLength": 3, "pattern": "^a"}, ["ab", "a", "abcd", "ba", 5]),
    ({"items": {"type": "integer"}, "minItems": 1, "maxItems": 2}, [[], [1], [1, 2, 3], [1, "x"], {"a": 1}]),
    ({"items": False}, [[], [1]]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x-": {"type": "string"}},
      "additionalProperties": False, "required": ["a"], "minProperties": 1, "maxProperties": 2},
     [{"a": 1}, {"a": "1"}, {"a": 1, "x-b": "s"}, {"a": 1, "x-b": 2}, {"a": 1, "b": 1}, {}, {"x-a": "s"}, [1]]),
    ({"additionalProperties": {"type": "string"}, "properties": {"n": {}}}, [{"n": 1, "s": "t"}, {"s": 1}]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, [1, -1, 0.5, -0.5, "x"]),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["s", None, 1]),
    ({"allOf": [{"minimum": 1}, {"maximum": 3}], "not": {"const": 2}}, [1, 2, 3, 4]),
    ({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"},
     [[], [[]], [[[], []]], [1], [[1]]]),
    ({"type": "object", "required": ["a"]}, ["not an object", {"b": 1}]),
]


@pytest.mark.parametrize(("schema", "instances"), CASES)
def test_keyword_corner_cases_agree_with_jsonschema(schema, instances):
    for instance in instances:
        mine, theirs = both(schema, instance)
        assert mine == theirs, (schema, instance)


def test_a_keyword_not_compiled_leaves_the_answer_to_jsonschema():
    assert compiled({"type": "object", "dependentRequired": {"a": ["b"]}}) is None
    assert compiled({"properties": {"a": {"if": {"type": "string"}}}}) is None
    assert compiled({"$ref": "https://example.com/other.json"}) is None
    assert valid(None, {}) is False  # no check: ask jsonschema


def test_equal_and_unique_as_jsonschema_compares():
    assert equal([1, {"a": "x"}], [1.0, {"a": "x"}]) and not equal(True, 1) and not equal([0], [False])
    assert unique([1, True]) and not unique([1, 1.0]) and unique([{"a": 1}, {"a": 2}]) and not unique([[1], [1]])


def test_deep_nesting_goes_to_jsonschema():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    schema = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    assert valid(compiled(schema), deep) is False  # RecursionError inside: the caller asks jsonschema


KEYS = [d.key for d in input_defs()]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False),
                    st.text(max_size=6), st.sampled_from(["Llama-3.1-8B", "online", "fp8", "bf16", "H100 SXM",
                                                          "air", "hard", "cn", "chat", "L40S"]))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5), st.booleans())
def test_generated_workloads_agree_with_jsonschema(fields, with_model):
    data: dict = {"model": "Llama-3.1-8B"} if with_model else {}
    for key, value in fields.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[last] = value
    mine, theirs = both(SCHEMAS["workload"], data)
    assert mine == theirs, data
    same_errors(SCHEMAS["workload"], data)


@pytest.fixture(scope="module")
def documents(example_plans):
    """A small real plan and a rule file (a list of rules; its first has a reject with figures),
    each with every path into it."""
    import yaml

    from servewise.engine.lang.rulebase import RULES_DIR

    plan = example_plans["chat-8b-small"].plan
    small = {**plan, "trace": plan["trace"][:5], "rejected": plan["rejected"][:3],
             "warnings": plan["warnings"][:2]}
    rules = yaml.safe_load((RULES_DIR / "filters" / "sla.yaml").read_text(encoding="utf-8"))[:1]
    return {"plan": (small, list(json_paths(small, items=4))[1:]),
            "rule": (rules, list(json_paths(rules, items=3))[1:])}


@pytest.mark.parametrize("kind", ["plan", "rule"])
@settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_documents_agree_with_jsonschema(documents, kind, data):
    """Valid or not as jsonschema says, and described by jsonschema's errors."""
    doc, paths = documents[kind]
    mutated = json.loads(json.dumps(doc))
    mutate_json(mutated, paths, data, json_values, data.draw(st.integers(0, 3)))
    mine, theirs = both(SCHEMAS[kind], mutated)
    assert mine == theirs
    same_errors(SCHEMAS[kind], mutated)


def test_every_example_workload_and_plan_is_valid_on_the_fast_path(example_plans):
    from servewise.engine.common.yamlio import load_file

    for name, planned in example_plans.items():
        data, _ = load_file(EXAMPLES / f"{name}.yaml")
        assert valid(compiled(SCHEMAS["workload"]), data), name
        assert valid(compiled(SCHEMAS["plan"]), planned.plan), name


def test_a_plan_of_a_valid_workload_does_not_import_jsonschema():
    code = ("import sys; from servewise.cli.main import run\n"
            "sys.argv = ['servewise', 'plan', sys.argv[1], '--format', 'json']\n"
            "assert run() == 0\n"
            "sys.stderr.write('jsonschema' in sys.modules and 'IMPORTED' or 'not imported')")
    out = subprocess.run([sys.executable, "-c", code, str(EXAMPLES / "chat-8b-small.yaml")],
                         capture_output=True, text=True, check=True)
    assert out.stderr.endswith("not imported")
