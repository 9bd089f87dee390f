"""A solution's load_inline calls read from its text, when its module is simple enough to be read exactly.

The capture sandbox imports a solution twice (two imports of torch, most of a fast-path build's CPU time)
to learn what it hands to load_inline. Most solutions are a few imports, string constants, one
load_inline call at top level and class definitions: their calls can be read without running anything.
This reads them only when every top-level statement is one of those, so the import the runner does later
makes the very same calls; anything else (another statement, a decorator, a name rebound, a value that
is not a constant) answers None and the sandbox captures as before. Nothing of the text runs here: the
syntax tree is walked, values are built from literals only, and their size is bounded.
"""

from __future__ import annotations

import ast
from typing import Any

from evalsvc.compiler.inline import InlineCall, normalize_call
from evalsvc.screening.checks import foreign_encoding

MAX_TEXT_CHARS = 2_000_000
MAX_VALUE_CHARS = 8 * 1024 * 1024  # the compile stage's own bound on a call's sources
MAX_READ_CHARS = 4 * MAX_VALUE_CHARS  # all values read, each counted by its size where it is used
# Modules whose import at a solution's top level does nothing a later import would do differently.
PLAIN_MODULES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.utils", "torch.utils.cpp_extension", "math", "typing",
    "__future__", "numbers", "dataclasses",
})  # fmt: skip
_LOADER = "torch.utils.cpp_extension"
_OPAQUE = object()  # bound to something, but not a constant


class _NotStatic(Exception):
    pass


def static_calls(text: str) -> list[InlineCall] | None:
    """The load_inline calls the module makes when imported, in order and without repeats; None when the
    text cannot be read for certain (the caller captures in the sandbox then)."""
    if len(text) > MAX_TEXT_CHARS or foreign_encoding("solution", text):
        return None
    try:
        tree = ast.parse(text)
        calls = _Reader().module(tree)
    except (_NotStatic, SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    unique = {c.key: c for c in calls}
    return list(unique.values()) or None


class _Reader:
    def __init__(self) -> None:
        self.env: dict[str, Any] = {}  # top-level name -> constant value, or _OPAQUE
        self.loaders: set[str] = set()  # names bound to load_inline itself
        self.modules: dict[str, str] = {}  # names bound to a plain module -> its dotted name
        self.spent = 0  # characters of every value read so far (red team 8: doubling lists and strings)
        self.sizes: dict[int, int] = {}  # id of a list or dict read -> its size, counted once
        self.kept: list[Any] = []  # those lists and dicts, alive so their ids stay theirs

    def module(self, tree: ast.Module) -> list[InlineCall]:
        calls: list[InlineCall] = []
        for i, stmt in enumerate(tree.body):
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                self._import(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and i == 0:
                continue  # the docstring
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                calls.append(self._load_inline(stmt.value))
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                calls.extend(self._assign(stmt))
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                self._function(stmt)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt)
            elif not _is_main_guard(stmt):
                raise _NotStatic
        return calls

    def _import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in PLAIN_MODULES:
                    raise _NotStatic
                bound = alias.asname or alias.name.split(".")[0]
                self._bind(bound, alias.name if alias.asname else alias.name.split(".")[0])
            return
        if stmt.level or stmt.module not in PLAIN_MODULES:
            raise _NotStatic
        for alias in stmt.names:
            full = f"{stmt.module}.{alias.name}"
            bound = alias.asname or alias.name
            if alias.name == "*":
                raise _NotStatic
            if full == f"{_LOADER}.load_inline":
                self._unbind(bound)
                self.loaders.add(bound)
            elif full in PLAIN_MODULES:
                self._bind(bound, full)
            else:
                self._unbind(bound)
                self.env[bound] = _OPAQUE

    def _bind(self, name: str, module: str) -> None:
        self._unbind(name)
        self.modules[name] = module

    def _unbind(self, name: str) -> None:
        if name in self.loaders:
            raise _NotStatic  # load_inline rebound: what the runner calls later is not known here
        self.modules.pop(name, None)
        self.env.pop(name, None)

    def _assign(self, stmt: ast.Assign | ast.AnnAssign) -> list[InlineCall]:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if stmt.value is None or not all(isinstance(t, ast.Name) for t in targets):
            raise _NotStatic
        if isinstance(stmt, ast.AnnAssign) and not _plain_annotation(stmt.annotation):
            raise _NotStatic  # a module-level annotation is evaluated at import
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        calls: list[InlineCall] = []
        if isinstance(stmt.value, ast.Call):
            calls.append(self._load_inline(stmt.value))
            value: Any = _OPAQUE
        else:
            value = self._value(stmt.value)
        for name in names:
            self._unbind(name)
            self.env[name] = value
        return calls

    def _load_inline(self, call: ast.Call) -> InlineCall:
        if not self._is_loader(call.func):
            raise _NotStatic
        args = [self._value(a) for a in call.args]
        kwargs: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                raise _NotStatic  # **kwargs
            kwargs[kw.arg] = self._value(kw.value)
        return normalize_call(tuple(args), kwargs)

    def _is_loader(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in self.loaders
        return _dotted(func, self.modules) == f"{_LOADER}.load_inline"

    def _value(self, node: ast.expr) -> Any:
        value = self._constant(node)
        if value is _OPAQUE:
            raise _NotStatic
        size = self._size(value)
        self.spent += size
        if size > MAX_VALUE_CHARS or self.spent > MAX_READ_CHARS:
            raise _NotStatic
        return value

    def _size(self, value: Any) -> int:
        """Characters (a list or dict: its items' sizes, each shared one counted at its own size)."""
        if isinstance(value, str):
            return len(value)
        if not isinstance(value, list | dict):
            return 1
        if (known := self.sizes.get(id(value))) is not None:
            return known
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        size = 1 + sum(self._size(v) for v in items)
        self.sizes[id(value)] = size
        self.kept.append(value)
        return size

    def _constant(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool | type(None)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise _NotStatic
            return self.env[node.id]
        if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
            return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
        if isinstance(node, ast.List | ast.Tuple):
            return [self._value(e) for e in node.elts]
        if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
            return {self._value(k): self._value(v) for k, v in zip(node.keys, node.values, strict=True) if k}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._value(node.left), self._value(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            if isinstance(left, list) and isinstance(right, list):
                return left + right
        raise _NotStatic

    def _function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A function's body runs later, not at import; its decorators, defaults and annotations run now."""
        self._signature(fn)
        if _mentions_loader(fn, self.loaders):
            raise _NotStatic  # a lazy load_inline: only the sandbox's import can see it
        self._unbind(fn.name)
        self.env[fn.name] = _OPAQUE

    def _signature(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if fn.decorator_list:
            raise _NotStatic
        for default in [*fn.args.defaults, *(d for d in fn.args.kw_defaults if d is not None)]:
            self._value(default)
        a = fn.args
        every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        notes = [x.annotation for x in every if x is not None and x.annotation is not None]
        if not all(_plain_annotation(n) for n in [*notes, *([fn.returns] if fn.returns else [])]):
            raise _NotStatic

    def _class(self, cls: ast.ClassDef) -> None:
        if cls.decorator_list or cls.keywords:
            raise _NotStatic
        for base in cls.bases:
            if not (dotted := _dotted(base, self.modules)) or not dotted.startswith("torch."):
                raise _NotStatic
        for i, stmt in enumerate(cls.body):
            if isinstance(stmt, ast.FunctionDef):
                self._signature(stmt)
            elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                self._value(stmt.value)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and i == 0:
                continue  # the docstring
            elif not isinstance(stmt, ast.Pass):
                raise _NotStatic
        if _mentions_loader(cls, self.loaders):
            raise _NotStatic
        self._unbind(cls.name)
        self.env[cls.name] = _OPAQUE


def _dotted(node: ast.expr, modules: dict[str, str]) -> str | None:
    """`torch.utils.cpp_extension.load_inline` for an attribute chain on a bound plain module."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in modules:
        return None
    return ".".join([modules[node.id], *reversed(parts)])


def _plain_annotation(node: ast.expr) -> bool:
    """Names, attributes of names, strings and subscripts of those (`torch.Tensor`, `list[int]`): what an
    annotation evaluated at definition time can be without calling anything of the solution's."""
    if isinstance(node, ast.Name | ast.Constant):
        return True
    if isinstance(node, ast.Attribute):
        return _plain_annotation(node.value)
    if isinstance(node, ast.Subscript):
        return _plain_annotation(node.value) and _plain_annotation(node.slice)
    if isinstance(node, ast.Tuple):
        return all(_plain_annotation(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _plain_annotation(node.left) and _plain_annotation(node.right)
    return False


def _mentions_loader(node: ast.AST, loaders: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in loaders:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("load_inline", "load"):
            return True
    return False


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` runs nothing on import."""
    if not isinstance(stmt, ast.If) or stmt.orelse or not isinstance(stmt.test, ast.Compare):
        return False  # an `else:` runs on import
    t = stmt.test
    return (
        isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and len(t.ops) == 1
        and isinstance(t.ops[0], ast.Eq)
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == "__main__"
    )
