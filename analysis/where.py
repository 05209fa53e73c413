"""A small, safe filter language for `where` strings, compiled to pyarrow expressions.

Column names contain dots (`model.heads`), so pandas' `query` and Python's `eval` are out (and
eval of user text is never acceptable). The grammar is deliberately small::

    expr       := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | "(" expr ")" | comparison
    comparison := operand (("=="|"="|"!="|"<"|"<="|">"|">=") operand
                           | ["not"] "in" "(" literal ("," literal)* ")"
                           | "is" ["not"] "null")?
    operand    := name | literal
    literal    := number | 'text' | "text" | true | false

A name is letters, digits, `_` and `.` (or any text in backquotes); a bare name is allowed only
for a boolean column (`learned and model.heads > 1`). Keywords are case-insensitive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

import pyarrow as pa
import pyarrow.compute as pc

from sweeper.results.errors import shown

from .errors import AnalysisInputError, unknown_column

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<quoted>`[^`]+`)
  | (?P<op>==|!=|<=|>=|<|>|=|\(|\)|,)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "in", "is", "null", "true", "false"}
_COMPARE = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# ---------------------------------------------------------------- syntax tree

@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Literal:
    value: object


@dataclass(frozen=True)
class Compare:
    op: str
    left: Name | Literal
    right: Name | Literal


@dataclass(frozen=True)
class InList:
    operand: Name
    values: tuple
    negate: bool


@dataclass(frozen=True)
class IsNull:
    operand: Name
    negate: bool


@dataclass(frozen=True)
class Truth:
    """A bare boolean column used as a condition."""
    operand: Name


@dataclass(frozen=True)
class Not:
    item: Node


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    items: tuple


Node = Compare | InList | IsNull | Truth | Not | BoolOp


# ---------------------------------------------------------------- parsing

@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _malformed(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind != "space":
            word = m.group()
            if kind == "name" and word.lower() in _KEYWORDS:
                kind, word = "kw", word.lower()
            tokens.append(_Tok(kind, word, pos))
        pos = m.end()
    tokens.append(_Tok("end", "", len(text)))
    return tokens


def _malformed(text: str, pos: int, why: str) -> AnalysisInputError:
    return AnalysisInputError(f"malformed where {shown(text)} at position {pos}: {why}")


MAX_DEPTH = 64  # levels of 'not' and parentheses: a query's few, never Python's limit


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, self.i, self.depth = text, _tokenize(text), 0, 0

    def peek(self) -> _Tok:
        return self.tokens[self.i]

    def take(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def accept(self, kind: str, text: str | None = None) -> bool:
        tok = self.peek()
        if tok.kind == kind and (text is None or tok.text == text):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str, what: str) -> None:
        if not self.accept(kind, text):
            self.fail(f"expected {what}")

    def fail(self, why: str) -> NoReturn:
        tok = self.peek()
        found = repr(tok.text) if tok.kind != "end" else "the end"
        raise _malformed(self.text, tok.pos, f"{why}, found {found}")

    def parse(self) -> Node:
        node = self.parse_bool("or", self.parse_and)
        if self.peek().kind != "end":
            self.fail("expected 'and', 'or' or the end")
        return node

    def parse_and(self) -> Node:
        return self.parse_bool("and", self.parse_not)

    def parse_bool(self, op: str, inner) -> Node:
        items = [inner()]
        while self.accept("kw", op):
            items.append(inner())
        return items[0] if len(items) == 1 else BoolOp(op, tuple(items))

    def parse_not(self) -> Node:
        if self.peek().text in ("not", "(") and self.peek().kind in ("kw", "op"):
            self.depth += 1
            if self.depth > MAX_DEPTH:  # before Python's own recursion limit is met
                self.fail(f"nested too deep (allowed: at most {MAX_DEPTH} levels of 'not' and "
                          "parentheses)")
            try:
                if self.accept("kw", "not"):
                    return Not(self.parse_not())
                if self.accept("op", "("):
                    node = self.parse_bool("or", self.parse_and)
                    self.expect("op", ")", "')'")
                    return node
            finally:
                self.depth -= 1
        return self.parse_comparison()

    def parse_comparison(self) -> Node:
        left = self.parse_operand()
        tok = self.peek()
        if tok.kind == "op" and tok.text in _COMPARE:
            self.take()
            right = self.parse_operand()
            if isinstance(left, Literal) and isinstance(right, Literal):
                raise _malformed(self.text, tok.pos, "a comparison needs a column name")
            return _oriented(_COMPARE[tok.text], left, right)
        if tok.kind == "kw" and tok.text in ("in", "not", "is"):
            return self.parse_membership(self.require_name(left))
        if isinstance(left, Literal):
            self.fail("expected a comparison after the value")
        return Truth(left)

    def parse_membership(self, operand: Name) -> Node:
        if self.accept("kw", "is"):
            negate = self.accept("kw", "not")
            self.expect("kw", "null", "'null'")
            return IsNull(operand, negate)
        negate = self.accept("kw", "not")
        self.expect("kw", "in", "'in'")
        self.expect("op", "(", "'(' after 'in'")
        values = [self.parse_literal()]
        while self.accept("op", ","):
            values.append(self.parse_literal())
        self.expect("op", ")", "')' closing the list")
        return InList(operand, tuple(values), negate)

    def number(self, tok: _Tok) -> int | float:
        """A number literal within what a column holds: an integer within int64 (a seed, a
        step), a float finite."""
        if re.search(r"[.eE]", tok.text):
            value = float(tok.text)
            if math.isfinite(value):
                return value
            why = "a number too large for a float"
        else:
            if len(tok.text.lstrip("-+0")) <= 19 and -(2**63) <= int(tok.text) < 2**63:
                return int(tok.text)
            why = "an integer beyond int64"
        self.i -= 1
        self.fail(f"{why} (allowed: integers within int64, finite numbers)")

    def require_name(self, operand: Name | Literal) -> Name:
        if not isinstance(operand, Name):
            self.fail("expected a column name before 'in' or 'is'")
        return operand

    def parse_operand(self) -> Name | Literal:
        tok = self.peek()
        if tok.kind == "name":
            self.take()
            return Name(tok.text)
        if tok.kind == "quoted":
            self.take()
            return Name(tok.text[1:-1])
        return Literal(self.parse_literal())

    def parse_literal(self) -> object:
        tok = self.take()
        if tok.kind == "number":
            return self.number(tok)
        if tok.kind == "string":
            return re.sub(r"\\(.)", r"\1", tok.text[1:-1])
        if tok.kind == "kw" and tok.text in ("true", "false"):
            return tok.text == "true"
        if tok.kind == "kw" and tok.text == "null":
            self.i -= 1
            self.fail("use 'is null' or 'is not null' to test for null")
        self.i -= 1
        self.fail("expected a column name or a value")


def _oriented(op: str, left: Name | Literal, right: Name | Literal) -> Compare:
    """Put the column on the left: `0.5 < x` becomes `x > 0.5`."""
    if isinstance(left, Literal) and isinstance(right, Name):
        return Compare(_FLIP[op], right, left)
    return Compare(op, left, right)


def parse(text: str) -> Node:
    """Parse a where string; raises AnalysisInputError (one line) when malformed."""
    if not text or not text.strip():
        raise AnalysisInputError("empty where: give a condition such as 'model.heads == 1'")
    return _Parser(text).parse()


# ---------------------------------------------------------------- inspection

def conjuncts(node: Node) -> list[Node]:
    """The top-level `and` terms: each can go to the table whose columns it names."""
    if isinstance(node, BoolOp) and node.op == "and":
        return [term for item in node.items for term in conjuncts(item)]
    return [node]


def names(node: Node) -> set[str]:
    """Every column name a condition mentions."""
    if isinstance(node, BoolOp):
        return set().union(*(names(item) for item in node.items))
    if isinstance(node, Not):
        return names(node.item)
    if isinstance(node, Compare):
        return {o.name for o in (node.left, node.right) if isinstance(o, Name)}
    return {node.operand.name}


def renamed(node: Node, names: Mapping[str, str]) -> Node:
    """The condition with column names replaced (`heads` -> `model.heads`)."""
    def name(operand):
        return Name(names.get(operand.name, operand.name)) if isinstance(operand, Name) \
            else operand

    if isinstance(node, BoolOp):
        return BoolOp(node.op, tuple(renamed(item, names) for item in node.items))
    if isinstance(node, Not):
        return Not(renamed(node.item, names))
    if isinstance(node, Compare):
        return Compare(node.op, name(node.left), name(node.right))
    if isinstance(node, InList):
        return InList(name(node.operand), node.values, node.negate)
    if isinstance(node, IsNull):
        return IsNull(name(node.operand), node.negate)
    return Truth(name(node.operand))


def join_and(nodes: list[Node]) -> Node | None:
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else BoolOp("and", tuple(nodes))


# ---------------------------------------------------------------- compiling

def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _value_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else "text"


def to_expression(node: Node, types: Mapping[str, pa.DataType]) -> pc.Expression:
    """Compile to a pyarrow expression, checking every name and type against `types`."""
    return _Compiler(types).compile(node)


class _Compiler:
    def __init__(self, types: Mapping[str, pa.DataType]):
        self.types = types

    def field(self, name: Name) -> tuple[pc.Expression, str]:
        if name.name not in self.types:
            raise unknown_column(name.name, self.types, "where")
        return pc.field(name.name), _kind(self.types[name.name])

    def operand(self, operand: Name | Literal) -> tuple[pc.Expression, str, str]:
        if isinstance(operand, Name):
            expr, kind = self.field(operand)
            return expr, kind, operand.name
        return pc.scalar(operand.value), _value_kind(operand.value), repr(operand.value)

    def compile(self, node: Node) -> pc.Expression:
        method = getattr(self, f"compile_{type(node).__name__.lower()}")
        return method(node)

    def compile_boolop(self, node: BoolOp) -> pc.Expression:
        exprs = [self.compile(item) for item in node.items]
        out = exprs[0]
        for expr in exprs[1:]:
            out = (out & expr) if node.op == "and" else (out | expr)
        return out

    def compile_not(self, node: Not) -> pc.Expression:
        return ~self.compile(node.item)

    def compile_truth(self, node: Truth) -> pc.Expression:
        expr, kind = self.field(node.operand)
        if kind != "bool":
            raise AnalysisInputError(
                f"where: {node.operand.name!r} is {kind}, not boolean; compare it to a value, "
                f"e.g. '{node.operand.name} == ...'")
        return expr

    def compile_isnull(self, node: IsNull) -> pc.Expression:
        expr, _ = self.field(node.operand)
        return ~expr.is_null() if node.negate else expr.is_null()

    def compile_inlist(self, node: InList) -> pc.Expression:
        expr, kind = self.field(node.operand)
        out = None
        for value in node.values:
            self.check(kind, _value_kind(value), node.operand.name, repr(value), "==")
            term = expr == pc.scalar(value)
            out = term if out is None else out | term
        return ~out if node.negate else out

    def compile_compare(self, node: Compare) -> pc.Expression:
        left, lkind, ltext = self.operand(node.left)
        right, rkind, rtext = self.operand(node.right)
        self.check(lkind, rkind, ltext, rtext, node.op)
        return {"==": left == right, "!=": left != right, "<": left < right,
                "<=": left <= right, ">": left > right, ">=": left >= right}[node.op]

    @staticmethod
    def check(lkind: str, rkind: str, ltext: str, rtext: str, op: str) -> None:
        if "null" in (lkind, rkind):
            return  # a column with no values at all: every comparison is null, no rows
        comparable = {"number", "text", "bool"}
        ordered = op in ("==", "!=") or lkind != "bool"
        if lkind != rkind or lkind not in comparable or not ordered:
            raise AnalysisInputError(
                f"where: cannot compare {ltext} ({lkind}) {op} {rtext} ({rkind})")
