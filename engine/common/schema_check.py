"""A JSON Schema (2020-12) validity check compiled to closures: is this instance valid, yes or no.

jsonschema walks a schema keyword by keyword on every instance, which costs a plan file ~20 ms
and a workload ~1 ms, and importing it costs every process ~50 ms. The inputs servewise reads
are nearly always valid, so callers ask :func:`compiled` first and use jsonschema only to
describe what is wrong (its messages stay the ones users see).

Only the keywords servewise's schemas use are compiled (see ``_KEYWORDS``), with jsonschema's
semantics: ``bool`` is neither a number nor an integer, an integral float is an integer, ``enum``
and ``uniqueItems`` compare as JSON (``True`` is not ``1``), ``pattern`` searches. A schema with
any other keyword compiles to None: the caller then asks jsonschema every time.
tests/test_schema_check.py compares the answers with jsonschema's on generated instances.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "default", "examples", "$defs",
                "deprecated", "readOnly", "writeOnly"}
_KEYWORDS = {"type", "properties", "patternProperties", "additionalProperties", "required", "minProperties",
             "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "enum", "const", "minimum",
             "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "anyOf",
             "oneOf", "allOf", "not", "$ref"}


class Unsupported(Exception):
    """A schema keyword (or form of one) this compiler does not implement."""


def _is_integer(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Number)


_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
}


def _unbool(x: Any, true: object = object(), false: object = object()) -> Any:
    if x is True:
        return true
    if x is False:
        return false
    return x


def equal(one: Any, two: Any) -> bool:
    """JSON equality as jsonschema compares (``True`` is not ``1``, recursively)."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and equal(v, two[k]) for k, v in one.items())
    return _unbool(one) == _unbool(two)


def unique(items: list[Any]) -> bool:
    """jsonschema's ``uniqueItems`` test, step for step (sorted neighbours, else all pairs)."""
    try:
        ordered = sorted(_unbool(i) for i in items)
        return not any(equal(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    except (NotImplementedError, TypeError):
        seen: list[Any] = []
        for e in items:
            e = _unbool(e)
            if any(equal(s, e) for s in seen):
                return False
            seen.append(e)
        return True


def _sizes(schema: dict[str, Any], kind: type, least: str, most: str) -> list[Check]:
    """The length bounds ``least``/``most`` of ``schema`` for instances of ``kind`` (others pass)."""
    out: list[Check] = []
    if least in schema:
        n = schema[least]
        out.append(lambda x: not isinstance(x, kind) or len(x) >= n)
    if most in schema:
        m = schema[most]
        out.append(lambda x: not isinstance(x, kind) or len(x) <= m)
    return out


class _Compiler:
    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if not target.startswith("#/"):
            raise Unsupported(f"$ref {target}")
        if target not in self.refs:
            node: Any = self.root
            for part in target[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            holder: list[Check] = []
            self.refs[target] = lambda x: holder[0](x)  # recursive schemas: resolved after compiling
            holder.append(self.compile(node))
        return self.refs[target]

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return lambda x: True
        if schema is False:
            return lambda x: False
        if not isinstance(schema, dict):
            raise Unsupported(repr(schema))
        unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        checks: list[Check] = []
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            tests = [_TYPES[n] for n in names]
            checks.append(tests[0] if len(tests) == 1 else (lambda x, ts=tuple(tests): any(t(x) for t in ts)))
        if "enum" in schema:
            options = list(schema["enum"])
            if all(type(o) is str for o in options):
                strings = frozenset(options)
                checks.append(lambda x: isinstance(x, str) and x in strings)
            else:
                checks.append(lambda x: any(equal(o, x) for o in options))
        if "const" in schema:
            const = schema["const"]
            checks.append(lambda x: equal(const, x))
        checks += self._numbers(schema) + self._strings(schema) + self._arrays(schema) + self._objects(schema)
        for key in ("anyOf", "oneOf", "allOf"):
            if key in schema:
                subs = [self.compile(s) for s in schema[key]]
                if key == "anyOf":
                    checks.append(lambda x, ss=subs: any(s(x) for s in ss))
                elif key == "oneOf":
                    checks.append(lambda x, ss=subs: sum(1 for s in ss if s(x)) == 1)
                else:
                    checks.append(lambda x, ss=subs: all(s(x) for s in ss))
        if "not" in schema:
            sub = self.compile(schema["not"])
            checks.append(lambda x: not sub(x))
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if not checks:
            return lambda x: True
        if len(checks) == 1:
            return checks[0]
        if len(checks) == 2:
            a, b = checks
            return lambda x: a(x) and b(x)
        all_checks = tuple(checks)
        return lambda x: all(c(x) for c in all_checks)

    @staticmethod
    def _numbers(schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        for key, fails in (("minimum", lambda x, b: x < b), ("maximum", lambda x, b: x > b),
                           ("exclusiveMinimum", lambda x, b: x <= b), ("exclusiveMaximum", lambda x, b: x >= b)):
            if key in schema:
                bound = schema[key]
                out.append(lambda x, b=bound, f=fails: not _is_number(x) or not f(x, b))
        return out

    @staticmethod
    def _strings(schema: dict[str, Any]) -> list[Check]:
        out = _sizes(schema, str, "minLength", "maxLength")
        if "pattern" in schema:
            search = re.compile(schema["pattern"]).search
            out.append(lambda x: not isinstance(x, str) or search(x) is not None)
        return out

    def _arrays(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        if "items" in schema:
            item = self.compile(schema["items"])
            out.append(lambda x: not isinstance(x, list) or all(item(v) for v in x))
        out += _sizes(schema, list, "minItems", "maxItems")
        if schema.get("uniqueItems") is True:
            out.append(lambda x: not isinstance(x, list) or unique(x))
        return out

    def _objects(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        props = {k: self.compile(v) for k, v in (schema.get("properties") or {}).items()}
        patterns = [(re.compile(p).search, self.compile(v)) for p, v in (schema.get("patternProperties") or {}).items()]
        extra = schema.get("additionalProperties", True)
        extra_check = None if extra is True else self.compile(extra)
        required = tuple(schema.get("required") or ())
        least, most = schema.get("minProperties"), schema.get("maxProperties")
        if not (props or patterns or extra_check or required or least is not None or most is not None):
            return out

        def check(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            for key in required:
                if key not in x:
                    return False
            if least is not None and len(x) < least or most is not None and len(x) > most:
                return False
            for key, value in x.items():
                sub = props.get(key)
                if sub is not None and not sub(value):
                    return False
                matched = False
                for search, pcheck in patterns:
                    if search(key):
                        matched = True
                        if not pcheck(value):
                            return False
                if sub is None and not matched and extra_check is not None and not extra_check(value):
                    return False
            return True

        out.append(check)
        return out


def compiled(schema: dict[str, Any]) -> Check | None:
    """A function telling whether an instance is valid against ``schema`` (as jsonschema's
    Draft 2020-12 validator would say), or None when the schema uses a keyword not compiled here."""
    try:
        return _Compiler(schema).compile(schema)
    except (Unsupported, KeyError, TypeError, re.error):
        return None


def valid(check: Check | None, instance: Any) -> bool:
    """True when ``check`` says ``instance`` is valid; False when it says not, could not compile, or
    checking it raised (nested too deeply, a key that is not text): the caller then asks
    jsonschema, which explains or raises as before."""
    if check is None:
        return False
    try:
        return bool(check(instance))
    except Exception:  # noqa: BLE001 - any doubt goes to jsonschema
        return False


def best_error(validator: Any, instance: Any) -> Any:
    """jsonschema's most relevant error of ``instance`` under ``validator`` (None: valid)."""
    import jsonschema

    return jsonschema.exceptions.best_match(validator.iter_errors(instance))


def jsonschema_validator(schema: dict[str, Any]) -> Any:
    """jsonschema's Draft 2020-12 validator of ``schema`` (imported here, on the error path), whose
    ``properties``, ``patternProperties`` and ``items`` skip a value the compiled check of its
    subschema finds valid: a valid subtree has no errors, so the errors (and ``best_match``'s pick)
    are jsonschema's own, found without walking the valid rest of a large plan file."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    quick = _SubschemaChecks(schema)

    def properties(validator: Any, properties: dict, instance: Any, _schema: dict) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for name, sub in properties.items():
            if name in instance and not quick.valid(sub, instance[name]):
                yield from validator.descend(instance[name], sub, path=name, schema_path=name)

    def pattern_properties(validator: Any, patterns: dict, instance: Any, _schema: dict) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for pattern, sub in patterns.items():
            for key, value in instance.items():
                if re.search(pattern, key) and not quick.valid(sub, value):
                    yield from validator.descend(value, sub, path=key, schema_path=pattern)

    def items(validator: Any, items: Any, instance: Any, schema: dict) -> Any:
        if items is False or "prefixItems" in schema or not validator.is_type(instance, "array"):
            yield from base.VALIDATORS["items"](validator, items, instance, schema)
            return
        for index, value in enumerate(instance):
            if not quick.valid(items, value):
                yield from validator.descend(instance=value, schema=items, path=index)

    narrowed = jsonschema.validators.extend(base, {"properties": properties, "patternProperties": pattern_properties,
                                                   "items": items})
    return narrowed(schema)


class _SubschemaChecks:
    """Compiled checks of a root schema's subschemas (``$ref`` resolved against the root), made on
    first use; a subschema that does not compile is never called valid (jsonschema then looks)."""

    def __init__(self, root: dict[str, Any]):
        self.compiler = _Compiler(root)
        self.checks: dict[int, tuple[Any, Check | None]] = {}

    def valid(self, sub: Any, instance: Any) -> bool:
        held = self.checks.get(id(sub))
        if held is None or held[0] is not sub:
            try:
                check: Check | None = self.compiler.compile(sub)
            except (Unsupported, KeyError, TypeError, re.error):
                check = None
            held = self.checks[id(sub)] = (sub, check)
        return valid(held[1], instance)
