"""A small, safe expression language for rule conditions and formulas.

Expressions are parsed once, at load time, with Python's ``ast`` module and checked against a
whitelist: arithmetic, comparisons, boolean logic, ``x if c else y``, list/tuple literals,
calls of whitelisted functions, and *fact paths* such as ``traffic.peak_qps`` (a dotted name is a
key into the facts, never attribute access on an object). Anything else — imports, lambdas,
comprehensions, subscripts, dunder or private names, attribute access on a non-name — is a
load-time error. Sizes are bounded (source length, node count, depth, exponent, literal size).
No rule text is ever passed to ``eval``: the checked tree is turned into Python source by
:func:`_generate`, which writes only whitelisted operators, registered function names, fact paths
and constants as ``repr`` literals, and that source is compiled (the rule cache keeps the code
object, so a process neither parses nor compiles the rules' expressions again).
"""

from __future__ import annotations

import ast
import functools
import marshal
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.common import limits
from servewise.engine.common.limits import MAX_ITEMS, MAX_TEXT
from servewise.engine.common.text import format_operand

MAX_SOURCE = 2000
MAX_NODES = 300
MAX_DEPTH = 40
MAX_EXPONENT = 64
MAX_LITERAL_ITEMS = 64
MAX_STRING = 200
MAX_NUMBER = 1e18
MAX_ROUND_DIGITS = 15
# A value an expression builds holds at most MAX_ITEMS items (the items of nested lists and records
# counted too) and MAX_TEXT characters (all its texts together; engine/common/limits.py): every
# operation that builds a list or a text checks the size it would have before building it (sum with
# a list start here, propose's combinations in engine/runtime/actions.py, joined in
# engine/domain/functions.py), and every value an operation, a call or a list literal gives is
# measured (_sized), so none grows past them.


class ExprError(ValueError):
    """An expression is not valid in the rule language (raised at load time)."""


class EvalError(ValueError):
    """An expression could not be evaluated with the facts at hand (raised at run time)."""


class NumberRangeError(EvalError):
    """A result beyond ±MAX_NUMBER: for a built-in rule on valid input, the workload's numbers are
    beyond what the rules compute with (cli/main.py reports it as an input error, exit 2)."""


class SizeLimitError(EvalError, limits.SizeLimit):
    """A value would hold more than MAX_ITEMS items or MAX_TEXT characters (raised before it is built
    where its size is known beforehand; :meth:`Expr.evaluate` prefixes the expression)."""


def check_items(n: int, what: str) -> None:
    """Raise :class:`SizeLimitError` if ``what`` would hold ``n`` > MAX_ITEMS items."""
    limits.check_items(n, what, SizeLimitError)


def check_text(n: int, what: str) -> None:
    """Raise :class:`SizeLimitError` if ``what`` would be ``n`` > MAX_TEXT characters long."""
    limits.check_text(n, what, SizeLimitError)


def _sized(value: Any) -> Any:
    """``value`` (a list or record) unless it holds more than MAX_ITEMS items or MAX_TEXT characters,
    nested ones included: a list of 64 references to one list of 20,000 items is 1.28 million
    items to whatever prints or saves it. Walks at most MAX_ITEMS items."""
    items = chars = 0
    todo = [value]
    pop, push = todo.pop, todo.extend
    while todo:
        v = pop()
        kind = type(v)
        if kind is str:
            chars += len(v)
            if chars > MAX_TEXT:
                raise SizeLimitError(f"a value of more than {MAX_TEXT} characters (limit {MAX_TEXT})")
        elif kind is list or kind is tuple or kind is dict:
            items += len(v)
            if items > MAX_ITEMS:
                raise SizeLimitError(f"a value of more than {MAX_ITEMS} items (limit {MAX_ITEMS})")
            push(v.values() if kind is dict else v)
            if kind is dict:
                push(v)  # its keys
    return value


def _round(x: float, ndigits: int = 0) -> float:
    if not -MAX_ROUND_DIGITS <= int(ndigits) <= MAX_ROUND_DIGITS:
        raise EvalError(f"round(): digits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}, "
                        f"got {ndigits}")
    return round(x, int(ndigits))


def _clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


def _sum(items: Any, start: Any = 0) -> Any:
    """``sum``; with a list start, the lists joined (their total length checked first), in linear time."""
    if type(start) is not list:
        return sum(items, start)
    parts = list(items)
    check_items(len(start) + sum(len(x) for x in parts if type(x) is list), "sum()")
    out = list(start)
    for x in parts:
        if type(x) is not list:
            raise TypeError(f'can only concatenate list (not "{type(x).__name__}") to list')
        out += x
    return out


BUILTIN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "round": _round,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "clamp": _clamp,
    "len": len,
    "sum": _sum,
    "int": int,
    "float": float,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_CMP_SYMBOLS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "≤", ast.Gt: ">", ast.GtE: "≥",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "×", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "^",
}

Resolver = Callable[[str], Any]


def _path(node: ast.AST) -> str | None:
    """The dotted fact path of a Name/Attribute chain, or None if it is not one (remembered on
    the node: explanations render the same trees thousands of times)."""
    try:
        return node._servewise_path  # type: ignore[attr-defined]
    except AttributeError:
        path = _find_path(node)
        try:
            node._servewise_path = path  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - every ast node takes attributes
            pass
        return path


def _find_path(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _check_name(path: str, src: str) -> None:
    for part in path.split("."):
        if part.startswith("_"):
            raise ExprError(f"name '{path}' is not allowed (no private or dunder names): {src}")


def _num_guard(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        if value != value:
            raise EvalError("result is not a number (NaN)")
        if abs(value) > MAX_NUMBER:
            raise NumberRangeError(f"number out of range ({value:.3g})")
        return value
    if kind is str:
        if len(value) > MAX_TEXT:
            raise SizeLimitError(f"a text of {len(value)} characters (limit {MAX_TEXT})")
        return value
    if kind is bool or value is None:
        return value
    if kind is list or kind is dict:
        return _sized(value)
    if isinstance(value, complex):
        raise EvalError(f"complex result ({value})")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value:
            raise EvalError("result is not a number (NaN)")
        if abs(value) > MAX_NUMBER:
            raise NumberRangeError(f"number out of range ({value:.3g})")
    return value


@dataclass
class Expr:
    """A checked, compiled expression."""

    source: str
    _tree: ast.Expression | None  # None when loaded from the rule cache: parsed again when needed
    names: tuple[str, ...]
    functions: tuple[str, ...]
    _fn: Callable[[Resolver], Any] = field(repr=False, default=None)  # type: ignore[assignment]
    # the functions it was checked against: a pickled expression (engine/common/rulecache.py) keeps
    # its generated code and is turned into a function again at its first evaluation
    _registry: Mapping[str, Callable[..., Any]] | None = field(repr=False, default=None, compare=False)
    # the checked tree as Python source of one function of the resolver (see _generate), and that
    # source compiled (marshalled code object: what the rule cache stores)
    _pysrc: str = field(repr=False, default="", compare=False)
    _code: bytes | None = field(repr=False, default=None, compare=False)

    def evaluate(self, resolve: Resolver) -> Any:
        fn = self._fn
        if fn is None:
            fn = self._link()
        try:
            return fn(resolve)
        except limits.SizeLimit as exc:  # from an operation here or a domain function
            src = self.source if len(self.source) <= 80 else self.source[:79] + "…"
            raise SizeLimitError(f"{src}: {exc}") from None
        except EvalError:
            raise
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError) as exc:
            raise EvalError(f"{self.source}: {exc}") from None

    @property
    def tree(self) -> ast.Expression:
        """The parsed source (the same tree it was checked and compiled from)."""
        tree = self._tree
        if tree is None:
            tree = self._tree = ast.parse(self.source, mode="eval")
        return tree

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # the function and the registry are not pickled, nor the tree (unpickling thousands of AST
        # nodes on every start costs more than parsing the few sources an explanation shows): the
        # generated code is, as a marshalled code object (the cache key holds the Python version)
        state["_code"] = self._compiled()
        state["_fn"] = state["_registry"] = state["_tree"] = None
        state["_pysrc"] = ""
        return state

    def _compiled(self) -> bytes:
        code = self._code
        if code is None:
            code = self._code = marshal.dumps(compile(self._pysrc, "<expr>", "eval"))
        return code

    def _link(self) -> Callable[[Resolver], Any]:
        """The function of the generated code, with the functions it calls as the registry has
        them now (the registry's before the built-in ones of the same name)."""
        factory = eval(marshal.loads(self._compiled()), _HELPERS)  # noqa: S307 - our own generated code
        registry = self._registry or {}
        try:
            fns = [registry[n] if n in registry else BUILTIN_FUNCTIONS[n] for n in self.functions]
        except KeyError as exc:
            raise EvalError(f"{self.source}: unknown function {exc}") from None
        self._fn = factory(*fns)
        return self._fn

    def evaluate_with(self, values: Mapping[str, Any]) -> Any:
        def resolve(name: str) -> Any:
            if name not in values:
                raise EvalError(f"{self.source}: '{name}' is not known")
            return values[name]

        return self.evaluate(resolve)

    @property
    def is_path(self) -> bool:
        """The expression is one fact path (a copy, not a computation)."""
        return _path(self.tree.body) is not None

    def render(self, values: Mapping[str, Any]) -> str:
        """The expression with each fact path replaced by its value (for explanations); a policy
        read (``policy('name')``) shows its value and name (``value (name)``)."""
        policy = (self._registry or {}).get("policy")
        if policy is not None and "policy" in self.functions:
            values = _PolicyValues(values, policy)
        return _render(self.tree.body, values)


class _PolicyValues(dict):
    """The values of an expression's names plus a way to show its policy reads."""

    def __init__(self, values: Mapping[str, Any], policy: Callable[[str], Any]):
        super().__init__(values)
        self.policy = policy


_UNKNOWN = object()


def _static(node: ast.AST, values: Mapping[str, Any]) -> Any:
    """The value of a call-free sub-expression from the values read, or ``_UNKNOWN``.

    Used only to decide which branch of ``x if c else y`` and which operand of ``and``/``or``
    explain a result; functions are never re-evaluated here.
    """
    path = _path(node)
    if path is not None:
        return values.get(path, _UNKNOWN)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_static(e, values) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _static(node.operand, values)
        return _UNKNOWN if v is _UNKNOWN else not v
    if isinstance(node, ast.BoolOp):
        vals = [_static(v, values) for v in node.values]
        if any(v is _UNKNOWN for v in vals):
            return _UNKNOWN
        return any(vals) if isinstance(node.op, ast.Or) else all(vals)
    if isinstance(node, ast.Compare):
        left = _static(node.left, values)
        if left is _UNKNOWN:
            return _UNKNOWN
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = _static(right_node, values)
            if right is _UNKNOWN:
                return _UNKNOWN
            try:
                if not _CMPOPS[type(op)](left, right):
                    return False
            except TypeError:
                return _UNKNOWN
            left = right
        return True
    return _UNKNOWN


def _render_boolop(node: ast.BoolOp, values: Mapping[str, Any]) -> str:
    """Show the operands that decide the result: the first deciding constant one, else the rest."""
    deciding = isinstance(node.op, ast.Or)  # `or` is decided by a true operand, `and` by a false one
    known = [(v, _static(v, values)) for v in node.values]
    for v, value in known:
        if value is not _UNKNOWN and bool(value) == deciding:
            return _render(v, values)
    kept = [v for v, value in known if value is _UNKNOWN] or [v for v, _ in known]
    if len(kept) == 1:
        return _render(kept[0], values)
    word = " and " if isinstance(node.op, ast.And) else " or "
    return "(" + word.join(_render(v, values) for v in kept) + ")"


def _render(node: ast.AST, values: Mapping[str, Any]) -> str:
    path = _path(node)
    if path is not None and path in values:
        return format_operand(values[path])
    if isinstance(node, ast.Constant):
        return format_operand(node.value)
    if isinstance(node, ast.BinOp):
        op = _SYMBOLS.get(type(node.op), "?")
        return f"({_render(node.left, values)} {op} {_render(node.right, values)})"
    if isinstance(node, ast.Call):
        if isinstance(values, _PolicyValues) and _path(node.func) == "policy" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
            return f"{format_operand(values.policy(name))} ({name})"
        args = ", ".join(_render(a, values) for a in node.args)
        return f"{_path(node.func)}({args})"
    if isinstance(node, ast.Compare):
        out = _render(node.left, values)
        for op, right in zip(node.ops, node.comparators, strict=False):
            out += f" {_CMP_SYMBOLS.get(type(op), '?')} "
            out += _render(right, values)
        return out
    if isinstance(node, ast.BoolOp):
        return _render_boolop(node, values)
    if isinstance(node, ast.UnaryOp):
        sym = "not " if isinstance(node.op, ast.Not) else ("-" if isinstance(node.op, ast.USub) else "+")
        return sym + _render(node.operand, values)
    if isinstance(node, ast.IfExp):
        test = _static(node.test, values)
        if test is not _UNKNOWN:  # only the branch taken explains the result
            return _render(node.body if test else node.orelse, values)
        return (f"({_render(node.body, values)} if {_render(node.test, values)} "
                f"else {_render(node.orelse, values)})")
    if isinstance(node, (ast.List, ast.Tuple)):
        return "[" + ", ".join(_render(e, values) for e in node.elts) + "]"
    return ast.unparse(node)


class _Compiler:
    def __init__(self, src: str, functions: Mapping[str, Callable[..., Any]]):
        self.src = src
        self.functions = functions
        self.names: list[str] = []
        self.called: list[str] = []
        self.count = 0
        self.variable = 0  # fact reads and domain-function calls compiled so far (see _fold)
        self.folded: dict[int, Any] = {}  # id of a constant sub-expression's node -> its value

    def fail(self, what: str) -> ExprError:
        return ExprError(f"{what} is not allowed in expressions: {self.src}")

    def compile(self, node: ast.AST, depth: int = 0) -> Callable[[Resolver], Any]:
        self.count += 1
        if self.count > MAX_NODES:
            raise ExprError(f"expression too large (more than {MAX_NODES} nodes): {self.src[:80]}")
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested too deeply (more than {MAX_DEPTH}): {self.src[:80]}")
        d = depth + 1
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            path = _path(node)
            if path is None:
                raise self.fail("attribute access on a value")
            _check_name(path, self.src)
            if path in ("True", "False", "None"):
                value = {"True": True, "False": False, "None": None}[path]
                return lambda r: value
            if path not in self.names:
                self.names.append(path)
            self.variable += 1
            return lambda r: r(path)
        if isinstance(node, ast.BinOp):
            mark = self.variable
            return self._fold(self._binop(node, d), mark, node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node, d)
        if isinstance(node, ast.BoolOp):
            parts = [self.compile(v, d) for v in node.values]
            if isinstance(node.op, ast.And):
                def f_and(r):
                    result = True
                    for p in parts:
                        result = p(r)
                        if not result:
                            return result
                    return result
                return f_and

            def f_or(r):
                result = False
                for p in parts:
                    result = p(r)
                    if result:
                        return result
                return result
            return f_or
        if isinstance(node, ast.Compare):
            return self._compare(node, d)
        if isinstance(node, ast.IfExp):
            test, body, orelse = (self.compile(n, d) for n in (node.test, node.body, node.orelse))
            return lambda r: body(r) if test(r) else orelse(r)
        if isinstance(node, (ast.List, ast.Tuple)):
            if len(node.elts) > MAX_LITERAL_ITEMS:
                raise ExprError(f"list literal longer than {MAX_LITERAL_ITEMS}: {self.src[:80]}")
            items = [self.compile(e, d) for e in node.elts]
            if all(isinstance(e, ast.Constant) for e in node.elts):
                return lambda r: [i(r) for i in items]
            return lambda r: _sized([i(r) for i in items])
        if isinstance(node, ast.Call):
            mark = self.variable
            return self._fold(self._call(node, d), mark, node)
        raise self.fail(type(node).__name__)

    def _fold(self, fn: Callable[[Resolver], Any], mark: int, node: ast.AST) -> Callable[[Resolver], Any]:
        """A constant sub-expression (no fact names, only built-in functions) is evaluated now, so
        bad arithmetic (NaN, complex, overflow, division by zero) fails at load, not in a plan.
        ``mark`` is ``self.variable`` before the sub-expression was compiled: unchanged means
        constant (counted while compiling, so nested sub-expressions are not walked again)."""
        if self.variable != mark:
            return fn
        try:
            value = _num_guard(fn(lambda name: None))
        except (EvalError, ArithmeticError, TypeError, ValueError) as exc:
            raise ExprError(f"invalid constant expression ({exc}): {self.src[:80]}") from None
        if isinstance(value, list):
            return fn
        self.folded[id(node)] = value
        return lambda r: value

    def _constant(self, node: ast.Constant) -> Callable[[Resolver], Any]:
        value = node.value
        if isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, (int, float)):
            if abs(value) > MAX_NUMBER:
                raise ExprError(f"number literal out of range: {self.src[:80]}")
        elif isinstance(value, str):
            if len(value) > MAX_STRING:
                raise ExprError(f"string literal longer than {MAX_STRING}: {self.src[:80]}")
        else:
            raise self.fail(f"constant of type {type(value).__name__}")
        return lambda r: value

    def _binop(self, node: ast.BinOp, d: int) -> Callable[[Resolver], Any]:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(f"operator {type(node.op).__name__}")
        left, right = self.compile(node.left, d), self.compile(node.right, d)
        if isinstance(node.op, ast.Pow):
            if isinstance(node.right, ast.Constant) and isinstance(node.right.value, (int, float)):
                if abs(node.right.value) > MAX_EXPONENT:
                    raise ExprError(f"exponent larger than {MAX_EXPONENT}: {self.src[:80]}")

            return lambda r: _pow(left(r), right(r))
        add, src = isinstance(node.op, ast.Add), self.src
        return lambda r: _bin(op, add, src, left(r), right(r))

    def _unary(self, node: ast.UnaryOp, d: int) -> Callable[[Resolver], Any]:
        operand = self.compile(node.operand, d)
        if isinstance(node.op, ast.Not):
            return lambda r: not operand(r)
        if isinstance(node.op, ast.USub):
            return lambda r: -operand(r)
        if isinstance(node.op, ast.UAdd):
            return lambda r: +operand(r)
        raise self.fail(f"operator {type(node.op).__name__}")

    def _compare(self, node: ast.Compare, d: int) -> Callable[[Resolver], Any]:
        ops = []
        for op in node.ops:
            fn = _CMPOPS.get(type(op))
            if fn is None:
                raise self.fail(f"comparison {type(op).__name__}")
            ops.append((type(op), fn))
        for op, comp in zip(node.ops, node.comparators, strict=False):
            if isinstance(op, (ast.Is, ast.IsNot)) and not (
                isinstance(comp, ast.Constant) and comp.value is None
            ):
                raise ExprError(f"'is' compares only with None: {self.src}")
        left = self.compile(node.left, d)
        rights = [self.compile(c, d) for c in node.comparators]
        if len(ops) == 1:  # the usual comparison: one operator, decided once here
            (kind, fn), right = ops[0], rights[0]
            if kind in _ORDERED:
                return lambda r: _cmp_ordered(fn, left(r), right(r))
            if kind in (ast.In, ast.NotIn):
                negated = kind is ast.NotIn
                return lambda r: _cmp_in(fn, negated, left(r), right(r))

            def compare_one(r):
                return bool(fn(left(r), right(r)))
            return compare_one

        def compare(r):
            return _chain(left(r), tuple((kind, fn, functools.partial(right, r))
                                         for (kind, fn), right in zip(ops, rights, strict=True)))
        return compare

    def _call(self, node: ast.Call, d: int) -> Callable[[Resolver], Any]:
        name = _path(node.func)
        if name is None or "." in name:
            raise self.fail("calling an attribute or expression")
        if node.keywords:
            raise self.fail("keyword arguments")
        if name not in self.functions:
            known = ", ".join(sorted(self.functions))
            raise ExprError(f"unknown function '{name}' (allowed: {known}): {self.src}")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail("*args")
        fn = self.functions[name]
        if name not in BUILTIN_FUNCTIONS:
            self.variable += 1
        args = [self.compile(a, d) for a in node.args]
        if name not in self.called:
            self.called.append(name)

        if len(args) == 1:
            (a0,) = args
            return lambda r: _num_guard(fn(a0(r)))
        if len(args) == 2:
            a0, a1 = args
            return lambda r: _num_guard(fn(a0(r), a1(r)))
        if len(args) == 3:
            a0, a1, a2 = args
            return lambda r: _num_guard(fn(a0(r), a1(r), a2(r)))

        def call(r):
            values = [a(r) for a in args]
            return _num_guard(fn(*values))
        return call


def compile_expr(src: Any, functions: Mapping[str, Callable[..., Any]] | None = None) -> Expr:
    """Parse and check ``src``; raise :class:`ExprError` with a clear message if not allowed."""
    if isinstance(src, bool) or src is None or isinstance(src, (int, float)):
        src = repr(src)
    if not isinstance(src, str):
        raise ExprError(f"an expression must be a string, got {type(src).__name__}")
    text = src.strip()
    if not text:
        raise ExprError("empty expression")
    if len(text) > MAX_SOURCE:
        raise ExprError(f"expression longer than {MAX_SOURCE} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error in expression '{text}': {exc.msg}") from None
    funcs = dict(BUILTIN_FUNCTIONS)
    if functions:
        funcs.update(functions)
    comp = _Compiler(text, funcs)
    comp.compile(tree.body)  # checks the tree, folds its constant parts
    # a factory of the function, taking the functions it calls (bound at its first evaluation)
    params = ", ".join(f"_F_{name}" for name in comp.called)
    pysrc = f"lambda {params}: lambda r: {_generate(tree.body, comp.folded, text)}"
    return Expr(text, tree, tuple(comp.names), tuple(comp.called), None, functions, pysrc)


# ----------------------------------------------------------------------------- generated code
# A checked tree becomes the source of one Python function of the resolver, ``lambda r: ...``
# (made by a factory that takes the functions it calls, ``lambda _F_max, ...: lambda r: ...``),
# with the same semantics as the closures the checker builds (same operators, guards and
# evaluation order, constant parts folded to the values the checker computed). Compiled once, it
# evaluates without a call per node, and its code object is what the rule cache stores (marshal),
# so a process neither parses nor compiles the rules' expressions again.


def _bin(op: Callable[[Any, Any], Any], add: bool, src: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        raise EvalError(f"{src}: a value is not set (None)")
    if isinstance(a, (str, list)) or isinstance(b, (str, list)):
        if not (add and type(a) is type(b)):
            raise EvalError(f"{src}: arithmetic on text or lists")
        if len(a) + len(b) > 10 * MAX_STRING:
            raise EvalError(f"{src}: result too long")
    return _num_guard(op(a, b))


def _pow(base: Any, exp: Any) -> Any:
    if abs(exp) > MAX_EXPONENT:
        raise EvalError(f"exponent {exp} larger than {MAX_EXPONENT}")
    if abs(base) > 1e6 and abs(exp) > 3:
        raise NumberRangeError("power result out of range")
    return _num_guard(base ** exp)


def _cmp_ordered(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False  # an unset value never satisfies an ordering
    return bool(fn(a, b))


def _cmp_in(fn: Callable[[Any, Any], Any], negated: bool, a: Any, b: Any) -> bool:
    if b is None:
        return negated
    return bool(fn(a, b))


_ORDERED = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _chain(a: Any, links: tuple[tuple[type, Callable[[Any, Any], Any], Callable[[], Any]], ...]) -> bool:
    """``a op1 b op2 c ...``: each right operand evaluated only when the chain gets to it."""
    for kind, fn, right in links:
        b = right()
        if kind in _ORDERED and (a is None or b is None):
            return False  # an unset value never satisfies an ordering
        if kind in (ast.In, ast.NotIn) and b is None:
            return kind is ast.NotIn
        if not fn(a, b):
            return False
        a = b
    return True


_HELPERS: dict[str, Any] = {
    "_bin": _bin, "_pow": _pow, "_g": _num_guard, "_cmp_ordered": _cmp_ordered, "_cmp_in": _cmp_in,
    "_chain": _chain, "_sized": _sized, "bool": bool, "__builtins__": {},
    **{f"_OP_{k.__name__}": v for k, v in _BINOPS.items()},
    **{f"_CMP_{k.__name__}": v for k, v in _CMPOPS.items()},
    **{f"_K_{k.__name__}": k for k in _CMPOPS},
}
def _literal(value: Any) -> str:
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def _generate(node: ast.AST, folded: dict[int, Any], src: str) -> str:
    """Python source of a checked sub-expression (see the section comment)."""
    if id(node) in folded:
        return _literal(folded[id(node)])

    def gen(n: ast.AST) -> str:
        return _generate(n, folded, src)

    if isinstance(node, ast.Constant):
        return _literal(node.value)
    if isinstance(node, (ast.Name, ast.Attribute)):
        path = _path(node)
        if path in ("True", "False", "None"):
            return str(path)
        return f"r({path!r})"
    if isinstance(node, ast.BinOp):
        left, right = gen(node.left), gen(node.right)
        if isinstance(node.op, ast.Pow):
            return f"_pow({left}, {right})"
        return f"_bin(_OP_{type(node.op).__name__}, {isinstance(node.op, ast.Add)}, {src!r}, {left}, {right})"
    if isinstance(node, ast.UnaryOp):
        sym = {ast.Not: "not ", ast.USub: "-", ast.UAdd: "+"}[type(node.op)]
        return f"({sym}{gen(node.operand)})"
    if isinstance(node, ast.BoolOp):
        word = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + word.join(gen(v) for v in node.values) + ")"
    if isinstance(node, ast.Compare):
        left = gen(node.left)
        if len(node.ops) == 1:
            kind, right = type(node.ops[0]), gen(node.comparators[0])
            if kind in _ORDERED:
                return f"_cmp_ordered(_CMP_{kind.__name__}, {left}, {right})"
            if kind in (ast.In, ast.NotIn):
                return f"_cmp_in(_CMP_{kind.__name__}, {kind is ast.NotIn}, {left}, {right})"
            return f"bool(_CMP_{kind.__name__}({left}, {right}))"
        links = ", ".join(f"(_K_{type(op).__name__}, _CMP_{type(op).__name__}, lambda: {gen(c)})"
                          for op, c in zip(node.ops, node.comparators, strict=True))
        return f"_chain({left}, ({links},))"
    if isinstance(node, ast.IfExp):
        return f"({gen(node.body)} if {gen(node.test)} else {gen(node.orelse)})"
    if isinstance(node, (ast.List, ast.Tuple)):
        items = "[" + ", ".join(gen(e) for e in node.elts) + "]"
        # constants are bounded at load (MAX_LITERAL_ITEMS of MAX_STRING); anything else is measured
        return items if all(isinstance(e, ast.Constant) for e in node.elts) else f"_sized({items})"
    if isinstance(node, ast.Call):
        return f"_g(_F_{_path(node.func)}({', '.join(gen(a) for a in node.args)}))"
    raise ExprError(f"{type(node).__name__} is not allowed in expressions: {src}")  # pragma: no cover - checked
