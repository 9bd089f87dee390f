"""The candidate in a model's completion: fenced code blocks read as a KernelBench file or a CUDA Agent tree.

Rules, in order:
- thinking is not the answer: `<think>…</think>` sections are dropped, an unclosed `<think>` drops the rest,
  and a lone `</think>` (the opening tag was in the prompt) drops everything before it;
- only complete fenced blocks count (``` or ~~~, closed by a fence of the same kind at least as long); a
  block cut off by the generation limit is ignored;
- blocks that name a file (in the info string, in a first-line comment, or on the line just before the
  fence) form a CUDA Agent tree when `model_new.py` and a CUDA source are among them: sources and
  headers outside `kernels/` are moved into it, the environment's own files are dropped, and a later block
  for the same name replaces an earlier one;
- otherwise the last Python block that defines `class ModelNew` is a KernelBench solution;
- where both are present, the one that ends later in the completion wins (the last complete solution);
- a completion with no fence that is itself Python defining `ModelNew` is taken as it is.
Anything else has no usable code: `Extraction.solution` is None and `problem` says why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from evalsvc.core.solutions import InvalidSolution, Solution, SolutionFormat

PYTHON_TAGS = frozenset({"python", "py", "python3"})
NATIVE_TAGS = frozenset({"cuda", "cu", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "cuh"})
_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
_NATIVE_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp"})
ENVIRONMENT_FILES = frozenset({"binding.cpp", "binding_registry.h"})  # the CUDA Agent environment's own
_ENTRY = "model_new.py"

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z0-9_][A-Za-z0-9_.-]*/){0,2}[A-Za-z0-9_][A-Za-z0-9_.-]*)")
_FIRST_LINE_NAME = re.compile(r"^\s*(?://|#|/\*)\s*(?:file(?:name)?\s*:\s*)?(?P<name>\S+?)\s*(?:\*/)?\s*$")
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One complete fenced block: its language tag, the file it names (if any), its text and where it
    ends in the completion."""

    lang: str
    name: str | None
    code: str
    end: int


@dataclass(frozen=True)
class Extraction:
    solution: Solution | None
    problem: str | None = None  # why there is no solution


def strip_thinking(text: str) -> str:
    """The completion without its reasoning sections."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    if "</think>" in text:  # the opening tag was part of the prompt
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:  # still thinking when the generation stopped
        text = text.split("<think>", 1)[0]
    return text


def _path_token(text: str) -> str | None:
    """The last token of `text` that reads as a relative file name with a source suffix."""
    cleaned = re.sub(r"[*`'\"]", " ", text)
    names = [m.group(1) for m in _PATH.finditer(cleaned) if m.group(1).endswith(_SUFFIXES)]
    return names[-1] if names else None


def _block_name(info_rest: str, before: str, code: str) -> str | None:
    named = _path_token(info_rest)
    if named:
        return named
    first = code.lstrip("\n").split("\n", 1)[0]
    m = _FIRST_LINE_NAME.match(first)
    if m and m.group("name").endswith(_SUFFIXES):
        return m.group("name")
    return _path_token(before) if len(before) <= 200 else None


def fenced_blocks(text: str) -> list[Block]:
    """Every complete fenced block in `text`, in order."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = next((k for k in range(i + 1, len(lines)) if close.match(lines[k])), None)
        if j is None:  # cut off: nothing after an unclosed fence is code we can trust
            break
        info = m.group("info").strip()
        lang, _, rest = info.partition(" ")
        lang = lang.lower()
        if lang.endswith(_SUFFIXES) and not rest:  # ```kernels/relu.cu
            lang, rest = PurePosixPath(lang).suffix.lstrip("."), lang
        code = "\n".join(lines[i + 1 : j]) + "\n"
        before = next((ln for ln in reversed(lines[max(0, i - 2) : i]) if ln.strip()), "")
        blocks.append(Block(lang, _block_name(rest, before, code), code, offsets[j + 1]))
        i = j + 1
    return blocks


def _agent_path(name: str) -> str | None:
    """A named file's place in a CUDA Agent tree (None: not part of it)."""
    p = PurePosixPath(name.lstrip("./"))
    if p.name in ENVIRONMENT_FILES:
        return None
    if p.name == _ENTRY:
        return _ENTRY
    if p.suffix in _NATIVE_SUFFIXES:
        return p.as_posix() if p.parts[0] == "kernels" and len(p.parts) == 2 else f"kernels/{p.name}"
    return None


def _agent_tree(blocks: list[Block]) -> tuple[dict[str, str], int] | None:
    files: dict[str, str] = {}
    end = 0
    for b in blocks:
        path = _agent_path(b.name) if b.name else None
        if path is None:
            continue
        files[path] = b.code
        end = max(end, b.end)
    if _ENTRY in files and any(k.endswith(".cu") for k in files):
        return files, end
    return None


def _kernelbench(blocks: list[Block]) -> Block | None:
    pythonic = [b for b in blocks if b.lang in PYTHON_TAGS or (b.name or "").endswith(".py") or not b.lang]
    found = [b for b in pythonic if _MODEL_NEW.search(b.code)]
    return found[-1] if found else None


def _bare_python(text: str) -> str | None:
    if not _MODEL_NEW.search(text):
        return None
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text


def _build(files: dict[str, str], fmt: SolutionFormat) -> Extraction:
    try:
        return Extraction(Solution(files=files, format=fmt))
    except (InvalidSolution, ValueError) as e:
        return Extraction(None, f"the extracted files are not a valid solution: {e}")


def extract(completion: str) -> Extraction:
    """The solution in a completion, or why there is none."""
    text = strip_thinking(completion.replace("\r\n", "\n"))
    blocks = fenced_blocks(text)
    if not blocks:
        bare = _bare_python(text.strip() + "\n") if text.strip() else None
        if bare:
            return _build({"solution.py": bare}, SolutionFormat.KERNELBENCH)
        return Extraction(None, "no complete fenced code block in the completion")
    tree = _agent_tree(blocks)
    single = _kernelbench(blocks)
    if tree and (single is None or tree[1] >= single.end):
        return _build(tree[0], SolutionFormat.CUDA_AGENT)
    if single:
        return _build({"solution.py": single.code}, SolutionFormat.KERNELBENCH)
    return Extraction(None, "no Python block defines ModelNew and no named files form a CUDA Agent tree")
