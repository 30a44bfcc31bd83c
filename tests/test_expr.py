"""The rule expression language: what it computes, and what it refuses at load time."""

from __future__ import annotations

import pytest

from servewise.engine.domain.functions import FUNCTIONS
from servewise.engine.lang.expr import EvalError, ExprError, compile_expr

HOSTILE = [
    "__import__('os').system('true')",
    "().__class__.__bases__[0].__subclasses__()",
    "open('/etc/passwd').read()",
    "eval('1+1')",
    "exec('x=1')",
    "getattr(model, 'id')",
    "model.__class__",
    "model._secret",
    "(lambda: 1)()",
    "[x for x in [1, 2, 3]]",
    "10 ** 10 ** 10",
    "9 ** 9 ** 9 ** 9",
    "'a' * 10 ** 9",
    "x[0]",
    "f'{x}'",
    "{1: 2}",
    "(1).real",
    "min(*[1, 2])",
    "max(key=len)",
    "x := 3",
    "import os",
    "a if b else c if d else (yield)",
    "1 +" + " 1 +" * 400 + " 1",
    "'" + "x" * 500 + "'",
    "[" + ", ".join(["1"] * 100) + "]",
]


@pytest.mark.parametrize("src", HOSTILE)
def test_hostile_expressions_fail_at_load(src):
    with pytest.raises(ExprError) as info:
        compile_expr(src, FUNCTIONS)
    assert str(info.value)  # a clear, non-empty message


def test_error_names_the_problem():
    with pytest.raises(ExprError, match="unknown function '__import__'"):
        compile_expr("__import__('os')")
    with pytest.raises(ExprError, match="private or dunder"):
        compile_expr("a.__class__")
    with pytest.raises(ExprError, match="exponent"):
        compile_expr("x ** 100")


def test_fact_paths_arithmetic_and_functions():
    e = compile_expr("ceil(traffic.peak_qps * 2 / candidate.tp) + max(1, 2)", FUNCTIONS)
    assert e.names == ("traffic.peak_qps", "candidate.tp")
    assert e.evaluate_with({"traffic.peak_qps": 20, "candidate.tp": 4}) == 12
    assert e.render({"traffic.peak_qps": 20, "candidate.tp": 4}) == "(ceil(((20 × 2) / 4)) + max(1, 2))"


def test_conditions_and_none():
    e = compile_expr("sla.ttft_ms != None and sla.ttft_ms < 300")
    assert e.evaluate_with({"sla.ttft_ms": None}) is False
    assert e.evaluate_with({"sla.ttft_ms": 200}) is True
    assert compile_expr("x > 3").evaluate_with({"x": None}) is False
    assert compile_expr("'nvidia' in vendors").evaluate_with({"vendors": ["nvidia"]}) is True
    assert compile_expr("a if c else b").evaluate_with({"a": 1, "b": 2, "c": False}) == 2


def test_runtime_bounds():
    with pytest.raises(EvalError):
        compile_expr("x ** y").evaluate_with({"x": 10, "y": 1000})
    with pytest.raises(EvalError):
        compile_expr("x + 1").evaluate_with({"x": None})
    with pytest.raises(EvalError):
        compile_expr("x / y").evaluate_with({"x": 1, "y": 0})


def test_render_shows_only_the_branch_taken_and_no_none() -> None:
    expr = compile_expr("max(ceil(1 / x), (ceil(y / 21) if y != None else 1))")
    text = expr.render({"x": 1.392, "y": None})
    assert text == "max(ceil((1 / 1.392)), 1)"
    assert "None" not in text


def test_render_boolean_shows_the_deciding_operands() -> None:
    expr = compile_expr("mode == 'offline' or ((t == None or a <= t) and (p == None or b <= p))")
    assert expr.render({"mode": "online", "t": 3000, "a": 1135, "p": 80, "b": 72.5}) == (
        "(1135 ≤ 3000 and 72.5 ≤ 80)")
    failing = compile_expr("a <= t and b <= p")
    assert failing.render({"a": 5, "t": 3, "b": 1, "p": 2}) == "5 ≤ 3"


def test_render_numbers_without_exponent() -> None:
    expr = compile_expr("a * b")
    assert expr.render({"a": 937746.3, "b": 1.5}) == "(937746 × 1.5)"
    assert "e+" not in compile_expr("a + 1").render({"a": 182512.5})


def test_render_keeps_conditions_it_cannot_decide_statically() -> None:
    expr = compile_expr("(f(a) if g(b) > 1 else 0)", {"f": abs, "g": abs})
    assert expr.render({"a": -2, "b": 3}) == "(f(-2) if g(3) > 1 else 0)"
