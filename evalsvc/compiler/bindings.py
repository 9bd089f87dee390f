"""Split a candidate's extension sources into its own translation units and binding units we generate.

The symbol screen reads the candidate's compiled objects for what they must not use (the Python C-API,
ATen compute, global constructors). Python bindings legitimately use the first, and CUDA Agent's
REGISTER_BINDING the last, so the bindings move to translation units generated here. Those hold nothing
of the candidate's but plain declarations of the functions they bind (return type, name, parameter
types), re-emitted token by token, and the `m.def` statements rebuilt from their parsed parts.

A small lexer (comments, literals, line splices, digraphs, directives) and a scan of the file's
top level, not a C++ parser: whatever cannot be read for certain is refused with a BindingError, whose
message the candidate sees as its compile error. Removed text is blanked (newlines kept), so the
compiler's line and column numbers in the candidate's own files still match what the candidate wrote.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import sysconfig
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from evalsvc.compiler.inline import InlineCall, generated_sources


class BindingError(Exception):
    """The sources cannot be bound as asked; the message is what the candidate sees as its compile error."""


@dataclass(frozen=True)
class SplitSources:
    own: dict[str, str]  # the candidate's translation units (relative file name -> text)
    binding: dict[str, str]  # translation units we generate (relative file name -> text)


MAX_SOURCE_CHARS = 3_000_000  # per file: bounds the lexer's time and memory on hostile input
MAX_TOKENS = 250_000  # per file, directives' tokens included
MAX_NAMESPACE_DEPTH = 16  # deeper namespaces hold nothing that can be bound
MAX_BINDINGS = 256  # m.def statements (or functions=) in one call or file
MAX_ALIASES = 2_000  # using-declarations, -directives and typedefs in one file: bounds the lookups
AGENT_ENV_FILES = ("binding.cpp", "binding_registry.h")
FORBIDDEN_IN_OWN = {
    "PYBIND11_MODULE", "PYBIND11_PLUGIN", "PYBIND11_EMBEDDED_MODULE", "REGISTER_BINDING", "BindingRegistry"
}  # fmt: skip
EXPECTED_DECL = "expected a plain declaration such as `torch::Tensor f(torch::Tensor x, int64_t n)`"
EXPECTED_DEFS = (
    'may contain only m.def("name", &function, "doc", py::arg("x") = literal, ...) statements '
    "(and `namespace py = pybind11;`)"
)

# ---------------------------------------------------------------------------------------------- lexer

_SPLICE = re.compile(r"\\[ \t\f\v]*(?:\r\n|\n|\r)")
_BLANK = re.compile(r"[ \t\f\v\x00]+")
_NEWLINE = re.compile(r"\r\n|\n|\r")
_IDENT = re.compile(r"[A-Za-z_$\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
_PPNUM = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*")
_QUOTED = {'"': re.compile(r'"(?:[^"\\\r\n]|\\.)*"?'), "'": re.compile(r"'(?:[^'\\\r\n]|\\.)*'?")}
_RAW_OPEN = re.compile(r'"([^ ()\\\t\v\f\r\n]{0,16})\(')
_STRING_PREFIXES = {"R", "u8R", "uR", "UR", "LR", "u8", "u", "U", "L"}
# no `>>`: a `>` always closes one template argument list
_PUNCTUATORS = [
    "%:%:", "<=>", "->*", "<<=", "...", "::", "->", ".*", "++", "--", "<<", "<=", ">=", "==", "!=", "&&",
    "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "<:", ":>", "<%", "%>", "%:"
]  # fmt: skip
_PUNCT = re.compile("|".join(re.escape(p) for p in _PUNCTUATORS) + r"|[\s\S]")
_DIGRAPHS = {"<:": "[", ":>": "]", "<%": "{", "%>": "}", "%:": "#", "%:%:": "##"}
_NUMBER = re.compile(
    r"(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?|[fF])?"
)
_ASCII_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Tok(NamedTuple):
    kind: str  # "id", "num", "str", "chr", "op" (punctuator or a stray character)
    text: str  # as the compiler reads it: splices removed, digraphs in their primary spelling
    start: int  # offsets in the original text
    end: int


class Directive(NamedTuple):
    name: str  # "define", "if", "include", ...; "" for a null directive
    toks: tuple[Tok, ...]  # the tokens after the name
    start: int
    end: int


@dataclass
class Lexed:
    fname: str
    text: str
    toks: list[Tok]
    directives: list[Directive]
    cond_starts: list[int] = field(default_factory=list)  # offsets where the #if nesting depth changes
    cond_depths: list[int] = field(default_factory=list)  # the depth from there on

    def line(self, offset: int) -> int:
        return len(_NEWLINE.findall(self.text, 0, max(0, offset))) + 1

    def where(self, offset: int) -> str:
        return f"{self.fname}:{self.line(offset)}"

    @functools.cached_property
    def directive_starts(self) -> list[int]:
        return [d.start for d in self.directives]

    def conditional(self, offset: int) -> bool:
        """Whether the text at offset lies inside an #if/#ifdef/#ifndef section."""
        k = bisect_right(self.cond_starts, offset)
        return k > 0 and self.cond_depths[k - 1] > 0

    @functools.cached_property
    def macros(self) -> set[str]:
        return {d.toks[0].text for d in self.directives if d.name in ("define", "undef") and d.toks}


class _Lexer:
    """Phases 1-3 of translation, enough to find tokens, directives and their original offsets."""

    def __init__(self, fname: str, text: str) -> None:
        if len(text) > MAX_SOURCE_CHARS:
            raise BindingError(f"{fname} is too large to bind ({len(text)} characters > {MAX_SOURCE_CHARS})")
        self.fname, self.text = fname, text
        pieces: list[str] = []
        self.cut_at: list[int] = []  # spliced offsets where a removed line continuation was
        self.cut_total: list[int] = []  # characters removed up to and including that one
        last = removed = 0
        for m in _SPLICE.finditer(text):
            pieces.append(text[last : m.start()])
            self.cut_at.append(m.start() - removed)
            removed += m.end() - m.start()
            self.cut_total.append(removed)
            last = m.end()
        pieces.append(text[last:])
        self.s = "".join(pieces)
        self.toks: list[Tok] = []
        self.directives: list[Directive] = []
        self.count = 0  # tokens so far, directives' included

    def counted(self, n: int) -> None:
        self.count += n
        if self.count > MAX_TOKENS:
            raise BindingError(f"{self.fname} is too large to bind (more than {MAX_TOKENS} tokens)")

    def orig(self, pos: int) -> int:
        """The original offset of the spliced text's offset pos."""
        k = bisect_right(self.cut_at, pos)
        return pos + (self.cut_total[k - 1] if k else 0)

    def orig_end(self, pos: int) -> int:
        return self.orig(pos - 1) + 1 if pos > 0 else 0

    def fail(self, pos: int, what: str) -> BindingError:
        line = len(_NEWLINE.findall(self.text, 0, self.orig(pos))) + 1
        return BindingError(f"{self.fname}:{line}: {what}")

    def skip_space(self, i: int, in_directive: bool) -> tuple[int, bool]:
        """Past blanks and comments from i; (position, whether a newline ended a directive line)."""
        s = self.s
        while i < len(s):
            if m := _BLANK.match(s, i):
                i = m.end()
            elif s.startswith("//", i):
                nl = _NEWLINE.search(s, i)
                i = nl.start() if nl else len(s)
            elif s.startswith("/*", i):
                end = s.find("*/", i + 2)
                if end < 0:
                    raise self.fail(i, "unterminated /* comment")
                i = end + 2
            elif in_directive and s[i] in "\r\n":
                return i, True
            else:
                return i, False
        return i, in_directive

    def run(self) -> Lexed:
        s, bol = self.s, True
        i = 1 if s.startswith("\ufeff") else 0  # compilers skip a byte order mark
        while True:
            i, _ = self.skip_space(i, False)
            if i >= len(s):
                break
            if s[i] in "\r\n":
                i, bol = _NEWLINE.match(s, i).end(), True  # type: ignore[union-attr]
            elif bol and (s[i] == "#" or s.startswith("%:", i)):
                i = self.directive(i)
            else:
                tok, i = self.token(i)
                self.toks.append(tok)
                self.counted(1)
                bol = False
        return self.finish()

    def directive(self, i: int) -> int:
        start = i
        i += 1 if self.s[i] == "#" else 2
        toks: list[Tok] = []
        while True:
            i, ended = self.skip_space(i, True)
            if ended or i >= len(self.s):
                break
            tok, i = self.token(i)
            toks.append(tok)
            self.counted(1)
        self.counted(1)  # the directive itself: bounds a file of empty `#` lines too
        name = toks[0].text if toks and toks[0].kind == "id" else ""
        rest = tuple(toks[1:] if name else toks)
        self.directives.append(Directive(name, rest, self.orig(start), self.orig_end(i)))
        return i

    def token(self, i: int) -> tuple[Tok, int]:
        s = self.s
        if m := _IDENT.match(s, i):
            word, nxt = m.group(), s[m.end() : m.end() + 1]
            if nxt == '"' and word in _STRING_PREFIXES:
                return self.literal(i, m.end(), word.endswith("R"))
            if nxt == "'" and word in ("u8", "u", "U", "L"):
                return self.literal(i, m.end(), False)
            return self.make("id", word, i, m.end()), m.end()
        if s[i] in "\"'":
            return self.literal(i, i, False)
        if m := _PPNUM.match(s, i):
            return self.make("num", m.group(), i, m.end()), m.end()
        if s.startswith("<::", i) and s[i + 3 : i + 4] not in (":", ">"):
            return self.make("op", "<", i, i + 1), i + 1  # `<::` is `<` `::` unless `<:::` or `<::>`
        m = _PUNCT.match(s, i)
        assert m is not None  # the pattern ends with "any character"
        text = m.group()
        return self.make("op", _DIGRAPHS.get(text, text), i, m.end()), m.end()

    def literal(self, start: int, q: int, raw: bool) -> tuple[Tok, int]:
        """A string or character literal whose opening quote is at q (prefix from start)."""
        s = self.s
        if raw:
            m = _RAW_OPEN.match(s, q)
            if not m:
                raise self.fail(start, "malformed raw string literal delimiter")
            close = ")" + m.group(1) + '"'
            end = s.find(close, m.end())
            if end < 0:
                raise self.fail(start, "unterminated raw string literal")
            end += len(close)
            k = bisect_right(self.cut_at, start)
            if k < len(self.cut_at) and self.cut_at[k] < end:
                raise self.fail(start, "a line continuation inside a raw string literal is not supported")
        else:
            end = _QUOTED[s[q]].match(s, q).end()  # type: ignore[union-attr]
        if m := _IDENT.match(s, end):  # a user-defined literal's suffix belongs to the literal
            end = m.end()
        kind = "chr" if s[q] == "'" else "str"
        return self.make(kind, s[start:end], start, end), end

    def make(self, kind: str, text: str, start: int, end: int) -> Tok:
        return Tok(kind, text, self.orig(start), self.orig_end(end))

    def finish(self) -> Lexed:
        lexed = Lexed(self.fname, self.text, self.toks, self.directives)
        depth = 0
        for d in self.directives:
            if d.name in ("if", "ifdef", "ifndef"):
                depth += 1
            elif d.name == "endif" and depth > 0:
                depth -= 1
            else:
                continue
            lexed.cond_starts.append(d.start)
            lexed.cond_depths.append(depth)
        return lexed


def lex(fname: str, text: str) -> Lexed:
    """Tokens and directives of one C++/CUDA file; BindingError where the lexer cannot read it."""
    return _Lexer(fname, text).run()


# ------------------------------------------------------------------------------------- top-level scan

_CLASS_KEYS = {"struct", "class", "union", "enum"}
_STRUCTURE = {"(", ")", "[", "]", "{", "}", ";"}


@dataclass
class Entity:
    """One declaration at namespace scope: a function definition or whatever ends with a `;`."""

    toks: list[Tok]  # up to the function body's `{`, or through the `;`
    body: list[Tok] | None  # a function definition's body, without its braces
    scope: tuple[str, ...] | None  # the enclosing namespaces; None where a function cannot be bound
    start: int  # the original offsets it spans, for removal
    end: int

    @functools.cached_property
    def declared(self) -> int | None:
        """Index of the function name this entity declares or defines, if it reads as one."""
        paren = angle = 0
        for k, t in enumerate(self.toks):
            if paren == 0 and angle == 0 and t.text == "=":
                return None  # an initializer: calls in it declare nothing
            if t.text == "(" and paren == 0 and angle == 0:
                before = self.toks[k - 1] if k else None
                ok = before is not None and before.kind == "id" and before.text != "operator"
                prev2 = self.toks[k - 2].text if k >= 2 else ""
                return k - 1 if ok and prev2 not in ("::", ".", "->") else None
            paren, angle = _nesting(self.toks, k, paren, angle)
        return None

    @property
    def name(self) -> str | None:
        k = self.declared
        return None if k is None else self.toks[k].text


def _nesting(toks: Sequence[Tok], k: int, paren: int, angle: int) -> tuple[int, int]:
    """Paren and (approximate) template-bracket depth after toks[k]."""
    t = toks[k].text
    if t in ("(", "["):
        return paren + 1, angle
    if t in (")", "]"):
        return max(0, paren - 1), angle
    if paren == 0 and t == "<" and k and (toks[k - 1].kind == "id"):
        return paren, angle + 1
    if paren == 0 and t == ">" and angle:
        return paren, angle - 1
    return paren, angle


@dataclass
class Scanned:
    lexed: Lexed
    entities: list[Entity]
    namespaces: set[str]  # namespaces the file opens
    types: set[str]  # classes, structs, unions and enums the file declares

    @functools.cached_property
    def by_name(self) -> dict[str, list[Entity]]:
        out: dict[str, list[Entity]] = {}
        for e in self.entities:
            if e.name is not None:
                out.setdefault(e.name, []).append(e)
        return out

    @functools.cached_property
    def aliases(self) -> list[_Alias]:
        found = [a for e in self.entities if (a := _alias(e)) is not None]
        if len(found) > MAX_ALIASES:
            raise BindingError(f"{self.lexed.fname}: more than {MAX_ALIASES} using-declarations and typedefs")
        return found

    @functools.cached_property
    def aliases_by_name(self) -> dict[str, list[_Alias]]:
        out: dict[str, list[_Alias]] = {}
        for a in self.aliases:
            if a.kind != "using":
                out.setdefault(a.name, []).append(a)
        return out


def _brace_pairs(lexed: Lexed) -> dict[int, int]:
    """Index of each `{` token -> index of its `}`; BindingError where braces do not balance."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k, t in enumerate(lexed.toks):
        if t.text == "{" and t.kind == "op":
            stack.append(k)
        elif t.text == "}" and t.kind == "op":
            if not stack:
                raise BindingError(
                    f"{lexed.where(t.start)}: a `}}` without its `{{` (braces must balance "
                    "outside the preprocessor in a file with bindings)"
                )
            pairs[stack.pop()] = k
    if stack:
        raise BindingError(
            f"{lexed.where(lexed.toks[stack[-1]].start)}: a `{{` without its `}}` (braces "
            "must balance outside the preprocessor in a file with bindings)"
        )
    return pairs


class _Scanner:
    """Cuts a file's namespace-scope token stream into entities, skipping function and class bodies."""

    def __init__(self, lexed: Lexed) -> None:
        self.lexed, self.toks = lexed, lexed.toks
        self.pairs = _brace_pairs(lexed)
        self.frames: list[tuple[str, ...] | None] = [()]
        self.cur: list[Tok] = []
        self.depth = 0
        self.grouped = False  # cur already holds a braced group: any further `{` in it is one too
        self.out = Scanned(lexed, [], set(), set())

    def run(self) -> Scanned:
        i = 0
        while i < len(self.toks):
            i = self.step(i)
        if self.depth:
            raise BindingError(f"{self.lexed.fname}: parentheses do not balance")
        return self.out

    def step(self, i: int) -> int:
        t = self.toks[i]
        if t.kind != "op" or t.text not in _STRUCTURE:
            self.cur.append(t)
        elif t.text in ("(", "["):
            self.depth += 1
            self.cur.append(t)
        elif t.text in (")", "]"):
            if not self.depth:
                raise BindingError(f"{self.lexed.where(t.start)}: a `{t.text}` without its opening bracket")
            self.depth -= 1
            self.cur.append(t)
        elif t.text == "{":
            return self.open_brace(i)
        elif t.text == "}":
            if self.depth or len(self.frames) == 1:
                raise BindingError(f"{self.lexed.where(t.start)}: brackets and braces do not nest")
            self.frames.pop()
            self.cur, self.grouped = [], False
        elif self.depth == 0:  # ";"
            self.emit([*self.cur, t], None, t.end)
        else:
            self.cur.append(t)
        return i + 1

    def open_brace(self, i: int) -> int:
        close = self.pairs[i]
        kind = "group" if self.depth or self.grouped else _brace_kind(self.cur)
        if kind == "namespace":
            self.push_namespace()
        elif kind == "function":
            self.emit(self.cur, self.toks[i + 1 : close], self.toks[close].end)
            return close + 1
        else:  # a class body, an initializer, a lambda: kept as its braces only
            self.cur += [self.toks[i], self.toks[close]]
            self.grouped = self.grouped or self.depth == 0
            return close + 1
        return i + 1

    def push_namespace(self) -> None:
        texts = [t.text for t in self.cur]
        outer = self.frames[-1]
        names = (
            [t for t in texts[texts.index("namespace") + 1 :] if t != "::"] if "namespace" in texts else []
        )
        plain = texts[0] == "namespace" and bool(names) and all(_ASCII_IDENT.fullmatch(n) for n in names)
        self.out.namespaces.update(n for n in names if _ASCII_IDENT.fullmatch(n))
        if plain and outer is not None and len(outer) + len(names) <= MAX_NAMESPACE_DEPTH:
            self.frames.append((*outer, *names))
        else:
            self.frames.append(None)  # not for extern "C", inline, anonymous
        self.cur, self.grouped = [], False

    def emit(self, toks: list[Tok], body: list[Tok] | None, end: int) -> None:
        if toks:
            self.out.entities.append(Entity(toks, body, self.frames[-1], toks[0].start, end))
            self.out.types.update(_declared_types(toks))
        self.cur, self.grouped = [], False


def _brace_kind(cur: list[Tok]) -> str:
    """What a `{` at namespace scope opens, from the tokens before it."""
    texts = [t.text for t in cur[:3]]
    if texts[:1] == ["namespace"] or texts[:2] == ["inline", "namespace"]:
        return "namespace"
    if len(cur) == 2 and texts[0] == "extern" and cur[1].kind == "str":
        return "namespace"  # a linkage block: its declarations are at namespace scope
    paren = angle = 0
    class_key = False
    for k, t in enumerate(cur):
        top = paren == 0 and angle == 0
        if top and t.text == "=":
            return "other"
        if top and t.text in _CLASS_KEYS:
            class_key = True
        if top and t.text == "(":
            return "other" if class_key else "function"
        paren, angle = _nesting(cur, k, paren, angle)
    return "other"


def _declared_types(toks: list[Tok]) -> Iterable[str]:
    paren = angle = 0
    for k, t in enumerate(toks[:-1]):
        nxt = toks[k + 1]
        if paren == 0 and angle == 0 and t.text in _CLASS_KEYS and nxt.kind == "id":
            yield toks[k + 2].text if nxt.text in ("class", "struct") and k + 2 < len(toks) else nxt.text
        paren, angle = _nesting(toks, k, paren, angle)


def scan(lexed: Lexed) -> Scanned:
    """The file's namespace-scope declarations; BindingError where its brackets do not balance."""
    return _Scanner(lexed).run()


# ------------------------------------------------------------------------------- plain declarations

_TYPE_KEYWORDS = {
    "const", "volatile", "unsigned", "signed", "long", "short", "int", "char", "bool", "float", "double",
    "void", "wchar_t", "char8_t", "char16_t", "char32_t"
}  # fmt: skip
_KEYWORDS = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "break", "case", "catch",
    "class", "co_await", "co_return", "co_yield", "compl", "concept", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "decltype", "default", "delete", "do", "dynamic_cast", "else", "enum",
    "explicit", "export", "extern", "false", "for", "friend", "goto", "if", "inline", "mutable",
    "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private",
    "protected", "public", "register", "reinterpret_cast", "requires", "return", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "using", "virtual", "while", "xor", "xor_eq", "typeof"
}  # fmt: skip
_PLAIN_OPS = {"::", "<", ">", ",", "*", "&", "&&"}
_LIBRARY_NAMESPACES = {"torch", "at", "c10", "std", "pybind11", "py", "caffe2"}
_GLOBAL_TYPES = {
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
    "ptrdiff_t", "intptr_t", "uintptr_t"
}  # fmt: skip


def _reserved(name: str) -> bool:
    return name.startswith("__") or (name.startswith("_") and name[1:2].isupper())


def _plain_problem(toks: Sequence[Tok]) -> Tok | None:
    """The first token that keeps a type from being plain (see _check_plain), or None."""
    angle = 0
    for k, t in enumerate(toks):
        if t.kind == "id":
            bad = not _ASCII_IDENT.fullmatch(t.text) or _reserved(t.text)
            bad = bad or (t.text in _KEYWORDS and t.text not in _TYPE_KEYWORDS)
        elif t.kind == "num":
            bad = angle == 0 or not _NUMBER.fullmatch(t.text)
        elif t.kind == "op" and t.text in _PLAIN_OPS:
            angle += {"<": 1, ">": -1}.get(t.text, 0)
            nxt = toks[k + 1] if k + 1 < len(toks) else None
            bad = angle < 0 or (t.text == "," and angle == 0)
            bad = bad or (t.text == "::" and (nxt is None or nxt.kind != "id"))
        else:
            bad = True
        if bad:
            return t
    return toks[-1] if angle else None


def _describe(t: Tok) -> str:
    if t.kind == "id" and _reserved(t.text):
        return f"`{t.text}` (attributes and compiler extensions are not copied)"
    if t.text in ("[", "[["):
        return "an attribute or array `[`"
    if t.text in ("(", ")"):
        return "parentheses (function pointers, macros taking arguments)"
    return f"`{t.text}`"


def _check_plain(toks: Sequence[Tok], lexed: Lexed, fn: str, part: str, at: int) -> list[str]:
    if not toks:
        raise BindingError(f"{lexed.where(at)}: cannot bind `{fn}`: its {part} is empty; {EXPECTED_DECL}")
    bad = _plain_problem(toks)
    if bad is not None:
        raise BindingError(
            f"{lexed.where(bad.start)}: cannot bind `{fn}`: its {part} uses {_describe(bad)}; {EXPECTED_DECL}"
        )
    return [t.text for t in toks]


def _split_top(toks: Sequence[Tok], sep: str) -> list[list[Tok]]:
    """toks cut at `sep` outside brackets; template brackets count until a parameter's `=`."""
    out: list[list[Tok]] = [[]]
    paren = angle = 0
    defaulted = False
    for k, t in enumerate(toks):
        if paren == 0 and angle == 0 and t.text == sep:
            out.append([])
            defaulted = False
            continue
        defaulted = defaulted or (paren == 0 and angle == 0 and t.text == "=")
        if t.text == "{":
            paren += 1
        elif t.text == "}":
            paren = max(0, paren - 1)
        else:
            paren, nested = _nesting(toks, k, paren, angle)
            angle = angle if defaulted else nested  # `<` in a default value may be a comparison
        out[-1].append(t)
    return out


def _drop_name(param: list[str]) -> list[str]:
    """A parameter's type: its name (a last identifier that follows a type) dropped."""
    last = param[-1]
    if not _ASCII_IDENT.fullmatch(last) or last in _KEYWORDS or last in _TYPE_KEYWORDS:
        return param
    before = [p for p in param[:-1] if p not in ("const", "volatile")]
    return param[:-1] if before and before[-1] != "::" else param


@dataclass
class _Decl:
    scope: tuple[str, ...]
    name: str
    ret: list[str]
    params: list[list[str]]
    removals: list[Tok]  # `static` / `inline` tokens to blank in the candidate's text
    entity: Entity

    @property
    def signature(self) -> tuple[str, ...]:
        """The types with their namespaces dropped: how overloads are told from a repeated declaration."""
        parts = [*self.ret, "(", *[t for p in self.params for t in (*p, ",")], ")"]
        return tuple(t for k, t in enumerate(parts) if t != "::" and parts[k + 1 : k + 2] != ["::"])

    def render(self) -> str:
        return f"auto {self.name}({', '.join(_join(p) for p in self.params)}) -> {_join(self.ret)};"

    def idents(self) -> list[tuple[str, bool]]:
        """(identifier, whether qualified by a `::` before it) of the return and parameter types."""
        seq = [*self.ret, ",", *[t for p in self.params for t in (*p, ",")]]
        return [(t, k > 0 and seq[k - 1] == "::") for k, t in enumerate(seq) if _ASCII_IDENT.fullmatch(t)]


def _join(texts: Sequence[str]) -> str:
    out = ""
    for k, t in enumerate(texts):
        glue = k == 0 or texts[k - 1] in ("::", "(", "<") or t in ("::", ",", "<", ">", ")", "(", ";")
        out += t if glue else " " + t
    return out


def _parse_decl(sc: Scanned, e: Entity, fn: str) -> _Decl:
    """The plain declaration of `fn` that entity e holds; BindingError for anything else."""
    lexed, toks, k = sc.lexed, e.toks, e.declared
    assert k is not None
    close = _matching_paren(toks, k + 1)
    after = [t.text for t in toks[close + 1 :]]
    if after != ([] if e.body is not None else [";"]):
        bad = toks[close + 1]
        raise BindingError(
            f"{lexed.where(bad.start)}: cannot bind `{fn}`: `{bad.text}` after its parameter "
            f"list is not supported; {EXPECTED_DECL}"
        )
    removals, rest = [], []
    for j, t in enumerate(toks[:k]):
        if t.text in ("static", "inline"):
            removals.append(t)
        elif t.text == "extern" and not (j + 1 < k and toks[j + 1].kind == "str"):
            continue  # a plain `extern` changes nothing; `extern "C"` is refused as not plain
        else:
            rest.append(t)
    ret = _check_plain(rest, lexed, fn, "return type", toks[k].start)
    params = []
    inner = toks[k + 2 : close]
    for p in _split_top(inner, ",") if inner else []:
        typed = p[: next((j for j, t in enumerate(p) if t.text == "="), len(p))]
        if not typed:
            raise BindingError(
                f"{lexed.where(toks[k].start)}: cannot bind `{fn}`: an empty parameter; {EXPECTED_DECL}"
            )
        params.append(_drop_name(_check_plain(typed, lexed, fn, "parameter list", toks[k].start)))
    assert e.scope is not None
    return _Decl(e.scope, fn, ret, params, removals, e)


def _matching_paren(toks: Sequence[Tok], k: int) -> int:
    depth = 0
    for j in range(k, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
        if depth == 0:
            return j
    raise BindingError(f"unbalanced parentheses near `{toks[k].text}` in the binding code")


# --------------------------------------------------------------------------- aliases and using-directives


@dataclass
class _Alias:
    kind: str  # "type" (using X = T; typedef T X; using a::X;), "namespace" (namespace X = a;), "using"
    name: str  # the name it introduces; for a using-directive, the namespace it opens
    toks: list[Tok]  # the whole declaration, through its `;`
    plain: bool
    deps: list[str]  # unqualified identifiers it refers to
    entity: Entity

    def render(self) -> str:
        return _join([t.text for t in self.toks])


def _alias(e: Entity) -> _Alias | None:
    texts = [t.text for t in e.toks]
    if e.body is not None or e.scope is None or len(texts) < 3 or texts[-1] != ";":
        return None
    if texts[:2] == ["using", "namespace"]:
        return _make_alias("using", texts[-2], e, e.toks[2:-1])
    if texts[0] == "using" and "=" in texts:
        return _make_alias("type", texts[1], e, e.toks[3:-1], texts[2] == "=" and len(texts) > 4)
    if texts[0] == "using":
        return _make_alias("type", texts[-2], e, e.toks[1:-1], "::" in texts)
    if texts[0] == "typedef":
        return _make_alias("type", texts[-2], e, e.toks[1:-2])
    if texts[0] == "namespace" and texts[2:3] == ["="]:
        return _make_alias("namespace", texts[1], e, e.toks[3:-1])
    return None


def _make_alias(kind: str, name: str, e: Entity, body: list[Tok], shaped: bool = True) -> _Alias:
    using_declaration = e.toks[0].text == "using" and "=" not in [t.text for t in e.toks]
    path_only = kind != "type" or using_declaration
    plain = (
        shaped and bool(body) and _plain_problem(body) is None and _ASCII_IDENT.fullmatch(name) is not None
    )
    if path_only:
        plain = plain and all(t.text == "::" or t.kind == "id" for t in body)
    deps = [t.text for k, t in enumerate(body) if t.kind == "id" and (k == 0 or body[k - 1].text != "::")]
    return _Alias(kind, name, e.toks, plain, deps, e)


def _visible(item: Entity, scope: tuple[str, ...], before: int) -> bool:
    return item.scope is not None and scope[: len(item.scope)] == item.scope and item.start < before


class _Needs:
    """What a binding unit copies from one candidate file: declarations and the aliases they rely on."""

    def __init__(self, sc: Scanned) -> None:
        self.sc = sc
        self.items: dict[int, tuple[tuple[str, ...], str]] = {}  # start offset -> (scope, text)
        self.idents: set[str] = set()

    def add_decl(self, d: _Decl) -> None:
        self.items[d.entity.start] = (d.scope, d.render())
        self.idents.update(t for t, _ in d.idents())
        self.idents.add(d.name)
        unknown = self.add_names(d, [t for t, q in d.idents() if not q])
        if unknown:
            self.add_using_directives(d, unknown)
        for t, qualified in d.idents():
            if qualified and t in self.sc.lexed.macros:
                self.refuse(d, f"uses `{t}`, a macro of your own")

    def add_names(self, d: _Decl, names: list[str]) -> list[str]:
        """Copy the aliases these unqualified names refer to; the names that stay unknown."""
        unknown, seen, queue = [], set(), list(names)
        while queue:
            n = queue.pop()
            if n in seen or n in _TYPE_KEYWORDS or n == d.name:
                continue
            seen.add(n)
            self.check_name(d, n)
            found = [
                a for a in self.sc.aliases_by_name.get(n, []) if _visible(a.entity, d.scope, d.entity.start)
            ]
            for a in found:
                if not a.plain:
                    self.refuse(d, f"uses `{n}`, whose alias `{a.render()}` is not plain")
                self.items[a.entity.start] = (a.entity.scope or (), a.render())
                self.idents.update(t.text for t in a.toks if t.kind == "id")
                queue += a.deps
            if not found and n not in _LIBRARY_NAMESPACES and n not in _GLOBAL_TYPES:
                unknown.append(n)
        return unknown

    def check_name(self, d: _Decl, n: str) -> None:
        if n in self.sc.lexed.macros:
            self.refuse(d, f"uses `{n}`, a macro of your own")
        if n in self.sc.types:
            self.refuse(
                d,
                f"uses `{n}`, a type of your own (bound functions take and return torch and standard types)",
            )
        if n in self.sc.namespaces and n not in _LIBRARY_NAMESPACES:
            self.refuse(d, f"uses `{n}`, a namespace of your own")

    def add_using_directives(self, d: _Decl, unknown: list[str]) -> None:
        """`using namespace X;` before the declaration, where a name of it may come from one."""
        for a in self.sc.aliases:
            if a.kind != "using" or not _visible(a.entity, d.scope, d.entity.start):
                continue
            head = next((t.text for t in a.toks[2:] if t.kind == "id"), "")
            if not a.plain or (head in self.sc.namespaces and head not in _LIBRARY_NAMESPACES):
                self.refuse(d, f"relies on `{a.render()}` (for `{unknown[0]}`), which cannot be copied")
            self.items[a.entity.start] = (a.entity.scope or (), a.render())
            self.idents.update(t.text for t in a.toks if t.kind == "id")

    def refuse(self, d: _Decl, why: str) -> None:
        raise BindingError(
            f"{self.sc.lexed.where(d.entity.start)}: cannot bind `{d.name}`: its declaration "
            f"{why}; {EXPECTED_DECL}"
        )

    def render(self) -> list[str]:
        out = []
        for _, (scope, text) in sorted(self.items.items()):
            out.append(f"namespace {'::'.join(scope)} {{ {text} }}" if scope else text)
        return out


def _scope_name(scope: tuple[str, ...] | None) -> str:
    if scope is None:
        return "an anonymous or inline namespace or a linkage block (no linkage the binding can use)"
    return f"namespace `{'::'.join(scope)}`" if scope else "the global namespace"


def _resolve(sc: Scanned, scope: tuple[str, ...], name: str, needs: _Needs) -> _Decl:
    """The one plain declaration of scope::name in the file, recorded in needs; BindingError otherwise."""
    lexed = sc.lexed
    qual = "::".join((*scope, name))
    if name in lexed.macros:
        raise BindingError(f"{lexed.fname}: cannot bind `{qual}`: it is a macro; {EXPECTED_DECL}")
    if scope[:1] and scope[0] in _LIBRARY_NAMESPACES:
        raise BindingError(
            f"{lexed.fname}: cannot bind `{qual}`: bind functions of your own, not in namespace `{scope[0]}`"
        )
    here = [e for e in sc.by_name.get(name, []) if e.scope == scope]
    if not here:
        raise _not_found(sc, scope, name)
    for e in here:
        _no_directives_inside(lexed, e.start, e.toks[-1].end, f"the declaration of `{qual}`")
    decls = [_parse_decl(sc, e, name) for e in here]
    if len({d.signature for d in decls}) > 1:
        raise BindingError(
            f"{lexed.where(here[1].start)}: cannot bind `{qual}`: it is declared with "
            "different signatures (overloads cannot be bound by name); declare it once"
        )
    decl = decls[0]
    decl.removals = [t for d in decls for t in d.removals]
    needs.add_decl(decl)
    return decl


def _not_found(sc: Scanned, scope: tuple[str, ...], name: str) -> BindingError:
    """Why no plain declaration of scope::name was found: elsewhere, unreadable, or absent."""
    lexed, qual = sc.lexed, "::".join((*scope, name))
    elsewhere = next((e for e in sc.by_name.get(name, []) if e.scope != scope), None)
    if elsewhere is not None:
        return BindingError(
            f"{lexed.where(elsewhere.start)}: cannot bind `{qual}`: it is declared in "
            f"{_scope_name(elsewhere.scope)}; declare the bound function where the binding names it"
        )
    for e in sc.entities:
        mention = next(
            (t for k, t in enumerate(e.toks[:-1]) if t.text == name and e.toks[k + 1].text == "("), None
        )
        if mention is not None and e.scope == scope:
            return BindingError(
                f"{lexed.where(mention.start)}: cannot bind `{qual}`: its declaration is not plain "
                f"(attributes, macros or initializers before its name are not supported); {EXPECTED_DECL}"
            )
    return BindingError(
        f"{lexed.fname}: cannot bind `{qual}`: no declaration or definition of it at the "
        f"top level of {lexed.fname}; {EXPECTED_DECL}"
    )


# ------------------------------------------------------------------------------------ m.def statements


@dataclass(frozen=True)
class _Def:
    name: str  # the Python name, the string literal as written
    target: tuple[str, ...]  # the C++ function's qualified name
    extras: tuple[str, ...]  # docstrings and pybind11::arg(...) [= literal], re-emitted

    def render(self, module: str) -> str:
        return f"{module}.def({', '.join([self.name, '&' + '::'.join(self.target), *self.extras])});"


def _ordinary_string(t: Tok) -> bool:
    return t.kind == "str" and t.text.startswith('"') and t.text.endswith('"') and len(t.text) >= 2


def _literal(toks: Sequence[Tok], py: set[str]) -> str | None:
    """A default value: a number, true/false, a string, or py::none()."""
    texts = [t.text for t in toks]
    if len(toks) == 1 and (toks[0].text in ("true", "false") or _ordinary_string(toks[0])):
        return toks[0].text
    if len(toks) == 1 and toks[0].kind == "num" and _NUMBER.fullmatch(texts[0]):
        return texts[0]
    if len(toks) == 2 and texts[0] in ("+", "-") and toks[1].kind == "num" and _NUMBER.fullmatch(texts[1]):
        return texts[0] + texts[1]
    if len(toks) == 5 and texts[0] in py and texts[1:] == ["::", "none", "(", ")"]:
        return "pybind11::none()"
    return None


def _extra(toks: Sequence[Tok], py: set[str]) -> str | None:
    """A docstring (adjacent string literals) or `py::arg("x") [= literal]`, re-emitted; None otherwise."""
    if toks and all(_ordinary_string(t) for t in toks):
        return " ".join(t.text for t in toks)
    texts = [t.text for t in toks]
    if len(toks) < 6 or texts[0] not in py or texts[1:4] != ["::", "arg", "("] or texts[5] != ")":
        return None
    if not _ordinary_string(toks[4]):
        return None
    arg = f"pybind11::arg({texts[4]})"
    if len(toks) == 6:
        return arg
    value = _literal(toks[7:], py) if texts[6] == "=" else None
    return None if value is None else f"{arg} = {value}"


def _target(toks: Sequence[Tok]) -> tuple[str, ...] | None:
    """`&f`, `f`, `&ns::f` or `::f` as a qualified name; None for anything else."""
    texts = [t.text for t in toks]
    texts = texts[1:] if texts[:1] == ["&"] else texts
    texts = texts[1:] if texts[:1] == ["::"] else texts
    names, seps = texts[0::2], texts[1::2]
    ok = bool(names) and all(s == "::" for s in seps) and len(names) == len(seps) + 1
    ok = ok and all(_ASCII_IDENT.fullmatch(n) and n not in _KEYWORDS and not _reserved(n) for n in names)
    return tuple(names) if ok else None


def _parse_def(st: list[Tok], module: str, py: set[str]) -> _Def | None:
    texts = [t.text for t in st]
    if len(st) < 5 or texts[:4] != [module, ".", "def", "("] or texts[-1] != ")":
        return None
    if _matching_paren(st, 3) != len(st) - 1:
        return None
    args = _split_top(st[4:-1], ",")
    if len(args) < 2 or len(args[0]) != 1 or not _ordinary_string(args[0][0]):
        return None
    target = _target(args[1])
    extras = [_extra(a, py) for a in args[2:]]
    if target is None or any(x is None for x in extras):
        return None
    return _Def(args[0][0].text, target, tuple(x for x in extras if x is not None))


def _parse_doc(st: list[Tok], module: str) -> str | None:
    """`m.doc() = "text";` as the docstring's literal(s)."""
    texts = [t.text for t in st]
    if texts[:6] != [module, ".", "doc", "(", ")", "="] or len(st) < 7:
        return None
    return " ".join(t.text for t in st[6:]) if all(_ordinary_string(t) for t in st[6:]) else None


def _pybind_alias(st: list[Tok]) -> str | None:
    """The alias that `namespace py = pybind11;` (or `= ::pybind11`) introduces."""
    texts = [t.text for t in st]
    shaped = len(st) >= 4 and texts[0] == "namespace" and st[1].kind == "id" and texts[2] == "="
    return texts[1] if shaped and texts[3:] in (["pybind11"], ["::", "pybind11"]) else None


def _parse_body(body: list[Tok], module: str, lexed: Lexed, what: str) -> tuple[list[_Def], list[str]]:
    """The m.def statements of a binding block (and m.doc() docstrings); BindingError for anything else."""
    py = {"py", "pybind11"}
    defs: list[_Def] = []
    docs: list[str] = []
    for st in _split_top(body, ";"):
        if not st:
            continue
        texts = [t.text for t in st]
        d = _parse_def(st, module, py) if not any(t in ("{", "}") for t in texts) else None
        if d is not None:
            defs.append(d)
        elif _pybind_alias(st) is not None:
            py.add(texts[1])
        elif (doc := _parse_doc(st, module)) is not None:
            docs.append(doc)
        else:
            snippet = " ".join(texts)
            snippet = snippet if len(snippet) <= 80 else snippet[:77] + "..."
            raise BindingError(
                f"{lexed.where(st[0].start)}: {what} {EXPECTED_DEFS}; `{snippet}` is not "
                "one (the registration must be declarative)"
            )
        if len(defs) > MAX_BINDINGS:
            raise BindingError(f"{lexed.fname}: more than {MAX_BINDINGS} bindings in one file")
    return defs, docs


# ------------------------------------------------------------------------------------------- editing


def _blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """text with each span's characters replaced by spaces, newlines kept (lines and columns stay)."""
    chars = list(text)
    for start, end in spans:
        for k in range(start, end):
            if chars[k] not in "\r\n":
                chars[k] = " "
    return "".join(chars)


def _no_directives_inside(lexed: Lexed, start: int, end: int, what: str) -> None:
    k = bisect_right(lexed.directive_starts, start - 1)
    if k < len(lexed.directives) and lexed.directives[k].start < end:
        raise BindingError(
            f"{lexed.where(lexed.directives[k].start)}: a preprocessor directive inside {what} is not "
            "supported (the binding code is moved out of this file)"
        )
    if lexed.conditional(start):
        raise BindingError(f"{lexed.where(start)}: {what} inside an #if/#ifdef section is not supported")


def check_own(fname: str, text: str, hint: str) -> None:
    """An own translation unit must hold no binding code: it compiles into the screened objects."""
    lexed = lex(fname, text)
    toks = [*lexed.toks, *[t for d in lexed.directives for t in d.toks]]
    for k, t in enumerate(toks):
        if t.kind != "id":
            continue
        member = k > 0 and toks[k - 1].text in (".", "->") and t.text == "def"
        if t.text in FORBIDDEN_IN_OWN or t.text.startswith("PyInit_") or member:
            shown = "m.def" if member else t.text
            raise BindingError(
                f"{lexed.where(t.start)}: `{shown}` outside the binding code evalsvc moves "
                f"out of your sources; {hint}"
            )


def _guard(idents: Iterable[str]) -> list[str]:
    """Preprocessor lines that stop the build if a name in the binding unit is a macro there."""
    names = sorted({n for n in idents if _ASCII_IDENT.fullmatch(n)} - {"TORCH_EXTENSION_NAME"})
    out = []
    for k in range(0, len(names), 6):
        chunk = names[k : k + 6]
        out += [
            "#if " + " || ".join(f"defined({n})" for n in chunk),
            '#error "evalsvc: a name in the bound declarations is a macro here; declarations must be plain"',
            "#endif",
        ]
    return out


# The names our own generated text uses: guarded too, so no -D flag or header macro changes them.
_FIXED_IDENTS = (
    "auto", "m", "def", "doc", "torch", "wrap_pybind_function", "pybind11", "arg", "none", "static", "void",
    "module", "namespace"
)  # fmt: skip

# -------------------------------------------------------------------------------------- load_inline

_CFLAG = re.compile(
    r"-O[0-3sgz]?|-Ofast|-g[\w-]*|-W(?![pal],)[\w=+-]*|-w|-pthread|-pedantic(?:-errors)?"
    r"|-f(?!plugin|preprocessed|directives-only|input-charset|pch|macro-prefix-map|file-prefix-map"
    r"|instrument-functions|working-directory)[\w=.,+-]+"
    r"|-m[\w=.,+-]+|-std=(?:c|gnu)\+\+(?:17|1z|20|2a|23|2b|26|2c)"
    r"|-[DU][A-Za-z_][A-Za-z0-9_]*(?:=(?:[A-Za-z_][A-Za-z0-9_]*|-?[0-9][A-Za-z0-9_.]*)?)?"
)


def check_cflags(flags: Sequence[str]) -> None:
    """extra_cflags also reach the generated binding unit: only flags that cannot put text into it."""
    for f in flags:
        if f.strip() and not _CFLAG.fullmatch(f):  # "" as KernelBench's prompt example passes: no flag
            raise BindingError(
                f"extra_cflags: `{f[:60]}` is not supported (C++ flags also reach the bindings evalsvc "
                "generates; allowed: -O*, -g*, -W*, -f*, -m*, -std=c++17 or later, -DNAME[=name or number], "
                "-UNAME, -pthread, -w)"
            )


_STRING_BODY = re.compile(r'(?:[^"\\\r\n]|\\[^\r\n])*')


def _docstring(doc: str, fn: str) -> str:
    """load_inline's `"{doc}"`, when that reads as exactly one string literal (else it could be code)."""
    if not _STRING_BODY.fullmatch(doc):
        raise BindingError(
            f"functions: the docstring of `{fn}` is not a plain string (no quotes, "
            "backslashes at its end or line breaks)"
        )
    return f'"{doc}"'


def _inline_bindings(call: InlineCall, main: Scanned) -> tuple[list[str], list[_Decl]]:
    """load_inline's generated block for functions=, with the declarations it needs from main.cpp."""
    assert call.functions is not None
    if len(call.functions) > MAX_BINDINGS:
        raise BindingError(f"functions: more than {MAX_BINDINGS} functions")
    needs = _Needs(main)
    decls, lines = [], []
    for fn, doc in call.functions.items():
        if not _ASCII_IDENT.fullmatch(fn) or fn in _KEYWORDS or fn in _TYPE_KEYWORDS:
            raise BindingError(f"functions: `{fn[:60]}` is not a plain function name")
        literal = _docstring(doc, fn)
        decls.append(_resolve(main, (), fn, needs))
        target = f"torch::wrap_pybind_function({fn})" if call.with_pytorch_error_handling else fn
        lines.append(f'm.def("{fn}", {target}, {literal});')
    body = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {", *lines, "}"]
    return _binding_unit(needs, body, [], "load_inline's bindings"), decls


def _binding_unit(needs: _Needs, body: list[str], includes: list[str], what: str) -> list[str]:
    idents = [*needs.idents, *_FIXED_IDENTS]
    head = [
        f"// Generated by evalsvc: {what}, with plain declarations of the functions they bind.",
        "#include <torch/extension.h>",
        *includes,
    ]
    return [*head, *_guard(idents), *needs.render(), *body]


def _mentions(lexed: Lexed, name: str) -> bool:
    return any(t.kind == "id" and t.text == name for t in lexed.toks)


def _find_block(lexed: Mapping[str, Lexed]) -> tuple[Scanned, Entity]:
    """The one PYBIND11_MODULE block of the sources, and the scanned file that holds it."""
    holders = [lx for lx in lexed.values() if _mentions(lx, "PYBIND11_MODULE")]
    if not holders:
        raise BindingError(
            "load_inline: no functions= and no PYBIND11_MODULE block in the sources: nothing would be bound"
        )
    if len(holders) > 1:
        raise BindingError(f"{holders[1].fname}: more than one PYBIND11_MODULE block")
    sc = scan(holders[0])
    blocks = sc.by_name.get("PYBIND11_MODULE", [])
    if len(blocks) != 1:
        raise BindingError(
            f"{sc.lexed.fname}: expected one `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ ... }}` "
            "block at the top level of the file"
        )
    return sc, blocks[0]


def _block_bindings(call: InlineCall, sc: Scanned, block: Entity) -> tuple[list[str], list[_Decl]]:
    """The candidate's own PYBIND11_MODULE block, re-emitted with the declarations it needs."""
    lexed = sc.lexed
    texts = [t.text for t in block.toks]
    ok = block.body is not None and block.scope == () and len(texts) == 6 and texts[1] == "("
    ok = ok and texts[2] in ("TORCH_EXTENSION_NAME", call.name) and texts[3] == "," and texts[5] == ")"
    if not ok or not _ASCII_IDENT.fullmatch(texts[4] if len(texts) > 4 else ""):
        raise BindingError(
            f"{lexed.where(block.start)}: expected `PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) "
            "{ ... }` at the top level of the file"
        )
    _no_directives_inside(lexed, block.start, block.end, "the PYBIND11_MODULE block")
    assert block.body is not None
    defs, docs = _parse_body(block.body, texts[4], lexed, "the PYBIND11_MODULE block")
    needs = _Needs(sc)
    decls = [_resolve(sc, d.target[:-1], d.target[-1], needs) for d in defs]
    body = [
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
        *[f"m.doc() = {doc};" for doc in docs],
        *[d.render("m") for d in defs],
        "}",
    ]
    needs.idents.update(n for d in defs for n in d.target)
    return _binding_unit(needs, body, [], "the PYBIND11_MODULE block of your sources"), decls


def split_inline(call: InlineCall) -> SplitSources:
    """A load_inline call's sources as its own units (main.cpp, cuda.cu) and the generated bind.cpp.

    The own units are what generated_sources writes, less the bindings: a PYBIND11_MODULE block of the
    candidate's is blanked out of its file, as are `static`/`inline` on the functions bound.
    """
    check_cflags(call.extra_cflags)
    own = generated_sources(call.model_copy(update={"functions": None}))
    lexed = {f: lex(f, t) for f, t in own.items()}
    if call.functions is not None:
        holder = next((lx for lx in lexed.values() if _mentions(lx, "PYBIND11_MODULE")), None)
        if holder is not None:
            raise BindingError(
                f"{holder.fname}: PYBIND11_MODULE together with load_inline's functions= "
                "would define the module twice; use one of them"
            )
        lines, decls = _inline_bindings(call, scan(lexed["main.cpp"]))
        edits = {"main.cpp": [(t.start, t.end) for d in decls for t in d.removals]}
    else:
        sc, block = _find_block(lexed)
        lines, decls = _block_bindings(call, sc, block)
        removals = [(t.start, t.end) for d in decls for t in d.removals]
        edits = {sc.lexed.fname: [(block.start, block.end), *removals]}
    out = {f: _blank(t, edits.get(f, [])) for f, t in own.items()}
    for f, t in out.items():
        check_own(
            f,
            t,
            "bind functions with load_inline's functions= or one PYBIND11_MODULE block of m.def statements",
        )
    return SplitSources(own=out, binding={"bind.cpp": "\n".join(lines) + "\n"})


# -------------------------------------------------------------------------------------- CUDA Agent


def _register_entities(sc: Scanned) -> list[tuple[Entity, str, str]]:
    """The file's `REGISTER_BINDING(name, fn);` statements as (entity, name, fn)."""
    out = []
    for e in sc.by_name.get("REGISTER_BINDING", []):
        texts = [t.text for t in e.toks]
        texts = texts[:4] + texts[5:] if texts[4:5] == ["&"] else texts
        shaped = e.body is None and e.scope == () and len(texts) == 7 and texts[1] == "("
        shaped = shaped and texts[3] == "," and texts[5:] == [")", ";"]
        if not shaped or not all(_ASCII_IDENT.fullmatch(n) for n in texts[2:5:2]):
            raise BindingError(
                f"{sc.lexed.where(e.start)}: expected `REGISTER_BINDING(name, register_fn);` "
                "at the top level, naming a register function"
            )
        _no_directives_inside(sc.lexed, e.start, e.end, "REGISTER_BINDING")
        out.append((e, texts[2], texts[4]))
    return out


def _register_head(e: Entity, fn: str) -> str | None:
    """The module parameter's name of `void fn(pybind11::module& m)` ("" unnamed); None if not that."""
    texts = [t.text for t in e.toks if t.text not in ("static", "inline")]
    texts = texts[:-1] if e.body is None and texts[-1:] == [";"] else texts
    if e.body is None and texts[-1:] == [")"] and len(texts) == 8:
        texts = [*texts[:7], "", ")"]  # a declaration may leave the parameter unnamed
    ok = len(texts) == 9 and texts[:3] == ["void", fn, "("] and texts[3] in ("py", "pybind11")
    ok = ok and texts[4] == "::" and texts[5] in ("module", "module_") and texts[6] == "&" and texts[8] == ")"
    return texts[7] if ok and (texts[7] == "" or _ASCII_IDENT.fullmatch(texts[7])) else None


def _register_fn(sc: Scanned, fn: str) -> tuple[list[Entity], str, list[Tok]]:
    """The register function's entities (to remove), its module parameter's name and its body."""
    lexed = sc.lexed
    ents = [e for e in sc.by_name.get(fn, []) if e.scope == ()]
    defs = [e for e in ents if e.body is not None]
    if len(defs) != 1:
        raise BindingError(
            f"{lexed.fname}: the register function `{fn}` must be defined once, at the top level of this file"
        )
    for e in ents:
        if _register_head(e, fn) is None:
            raise BindingError(
                f"{lexed.where(e.start)}: expected `void {fn}(pybind11::module& m) {{ m.def(...); "
                "}`: the registration must be declarative"
            )
        _no_directives_inside(lexed, e.start, e.end, f"the register function `{fn}`")
    module, body = _register_head(defs[0], fn), defs[0].body
    assert module and body is not None
    return ents, module, body


def _split_binding_file(fname: str, text: str) -> tuple[str, str, list[_Decl]]:
    """A *_binding.cpp file: (own text, generated registration text, the declarations it binds)."""
    sc = scan(lex(fname, text))
    registrations = _register_entities(sc)
    if not registrations:
        return text, "", []
    needs = _Needs(sc)
    spans, decls, body, done = [], [], [], set()
    for reg, name, fn in registrations:
        spans.append((reg.start, reg.end))
        if fn in done:  # registered twice: the function is written once
            body += [f"REGISTER_BINDING({name}, {fn});", ""]
            continue
        done.add(fn)
        ents, module, fn_body = _register_fn(sc, fn)
        defs, docs = _parse_body(fn_body, module, sc.lexed, f"the register function `{fn}`")
        if docs:
            raise BindingError(
                f"{sc.lexed.fname}: m.doc() is the environment's; the register function "
                f"`{fn}` {EXPECTED_DEFS}"
            )
        decls += [_resolve(sc, d.target[:-1], d.target[-1], needs) for d in defs]
        body += [
            f"static void {fn}(pybind11::module& m) {{",
            *[d.render("m") for d in defs],
            "}",
            "",
            f"REGISTER_BINDING({name}, {fn});",
            "",
        ]
        spans += [(e.start, e.end) for e in ents]
        needs.idents.update([fn, *[n for d in defs for n in d.target]])
    spans += [(t.start, t.end) for d in decls for t in d.removals]
    lines = _binding_unit(needs, body, ['#include "../binding_registry.h"'], f"the registration of {fname}")
    return _blank(text, spans), "\n".join(lines) + "\n", decls


@functools.cache
def _system_include_dirs() -> tuple[Path, ...]:
    """Directories the compilers search for <...> headers (torch, CUDA, Python, the C++ library)."""
    dirs: list[str] = [sysconfig.get_paths()["include"], "/usr/local/cuda/include"]
    try:
        from torch.utils import cpp_extension as cx

        from evalsvc.compiler.ninja_build import vendor_include_flags

        dirs += cx.include_paths()
        dirs += [os.path.join(cx.CUDA_HOME, "include")] if cx.CUDA_HOME else []
        dirs += [f.split(" ", 1)[1] for f in vendor_include_flags()]
    except ImportError:  # no torch where this runs: the compiler's own directories still count
        pass
    for pattern in (
        "/usr/include",
        "/usr/local/include",
        "/usr/include/c++/*",
        "/usr/include/*-linux-gnu",
        "/usr/include/*-linux-gnu/c++/*",
        "/usr/lib/gcc/*/*/include",
        "/usr/lib/gcc/*/*/include-fixed",
    ):
        dirs += glob.glob(pattern)
    return tuple(dict.fromkeys(Path(d) for d in dirs if os.path.isdir(d)))


def _check_tree_names(files: Mapping[str, str], generated: set[str]) -> None:
    """No file may stand in for the environment's, a generated one, or a system header: the candidate's
    directories are on the include path of every unit, the generated ones included."""
    if len(files) > 4 * MAX_BINDINGS:
        raise BindingError(f"too many files ({len(files)})")
    for rel in files:
        path = PurePosixPath(rel)
        if not rel or path.is_absolute() or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
            raise BindingError(f"{rel[:80]!r}: not a plain relative path")
        if rel in AGENT_ENV_FILES:
            raise BindingError(f"{rel}: this file is provided by the environment; do not submit it")
        if rel in generated:
            raise BindingError(f"{rel}: this name is taken by the registration evalsvc generates; rename it")
        names = [rel, *([str(PurePosixPath(*path.parts[1:]))] if path.parts[:1] == ("kernels",) else [])]
        for name in names:
            shadowed = next((d / name for d in _system_include_dirs() if (d / name).is_file()), None)
            if shadowed is not None:
                raise BindingError(f"{rel}: has the name of a system header ({shadowed}); rename it")


def _object_name(rel: str) -> str:
    p = PurePosixPath(rel)
    return p.stem + (".cuda.o" if p.suffix == ".cu" else ".o")


def _is_unit(rel: str) -> bool:
    """Whether build_cuda_agent compiles this file: *.cpp and *.cu at the top level or in kernels/."""
    p = PurePosixPath(rel)
    return p.suffix in (".cpp", ".cu") and (
        len(p.parts) == 1 or (len(p.parts) == 2 and p.parts[0] == "kernels")
    )


def split_agent_tree(files: Mapping[str, str]) -> SplitSources:
    """A CUDA Agent tree's translation units as the candidate's own and generated registrations.

    files: the tree's files by relative name (kernels/*.cu, kernels/*_binding.cpp, ...); other files
    (headers, model_new.py) are only checked. own: every unit build_cuda_agent compiles, with each
    kernels/<x>_binding.cpp's registration moved to binding["kernels/<x>_registration.cpp"], which
    includes "../binding_registry.h" (relative to itself: the environment's file at the tree's root).
    """
    binders = sorted(
        r for r in files if _is_unit(r) and r.startswith("kernels/") and r.endswith("_binding.cpp")
    )
    generated = {r[: -len("_binding.cpp")] + "_registration.cpp" for r in binders}
    _check_tree_names(files, generated)
    own: dict[str, str] = {}
    binding: dict[str, str] = {}
    bound: dict[tuple[str, ...], tuple[str, bool]] = {}  # function -> (binding file, had `static`)
    for rel in sorted(r for r in files if _is_unit(r)):
        if rel not in binders:
            own[rel] = files[rel]
            continue
        own[rel], registration, decls = _split_binding_file(rel, files[rel])
        if registration:
            binding[rel[: -len("_binding.cpp")] + "_registration.cpp"] = registration
        for d in decls:
            qual = (*d.scope, d.name)
            other, other_static = bound.setdefault(qual, (rel, bool(d.removals)))
            if other != rel and (other_static or d.removals):
                raise BindingError(
                    f"{rel}: `{'::'.join(qual)}` is also bound by {other}; bound functions get "
                    "external linkage, so give them different names"
                )
    _check_objects([*own, *binding])
    for rel, text in own.items():
        check_own(
            rel,
            text,
            "bind functions only in a kernels/<name>_binding.cpp register function "
            "of m.def statements, registered with REGISTER_BINDING",
        )
    return SplitSources(own=own, binding=binding)


def _check_objects(units: list[str]) -> None:
    """torch's ninja file names each object after its source's base name: they must differ."""
    seen: dict[str, str] = {_object_name(f): f for f in AGENT_ENV_FILES if f.endswith(".cpp")}
    for rel in units:
        other = seen.setdefault(_object_name(rel), rel)
        if other != rel:
            raise BindingError(f"{rel}: its object file would have the same name as {other}'s; rename it")
