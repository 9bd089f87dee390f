"""The real C preprocessor over a solution's C++/CUDA text, on the trusted side, for the static screens.

The token screen (evalsvc.screening.native) reads raw text: it cannot expand `#define KNS at` or a
`-DKNS=at` flag. Here `g++ -E` does, so the screen can read what the compiler will. The text is hostile
and this runs outside the sandbox, so:

- no file is ever read: every include-like directive (`#include`, `#include_next`, `#import`, `#embed`,
  with spaces, comments or the `%:` digraph, after backslash-newline splices are joined and universal
  character names decoded) is removed; `__has_include` always answers 0 and `#pragma GCC dependency`
  loses its name; token pasting (`##`), which could build those names, is dropped; cpp runs with
  `-nostdinc`, no include paths, stdin as input and an empty, unwritable working directory;
- it runs as an unprivileged user (when we are root), with an empty environment, under CPU, memory,
  file-size and open-file limits and a wall-clock timeout; its output goes to a file capped in size, so a
  macro bomb stops at the cap or the timeout.

Line markers are kept (no `-P`): `# 12 "<stdin>"` maps each output line back to the original text, and
the screen honours them. CUDA sources get a host pass (`-D__CUDACC__ -D__NVCC__`, no `__CUDA_ARCH__`).
Failure, timeout or too much output raise PreprocessError; the caller decides what that means.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from evalsvc.compiler.flags import sets_predefined_macros, split_flags
from evalsvc.screening.native import decode_ucns, join_splices, literal_end

MAX_INPUT_BYTES = 8 * 1024 * 1024  # the compile stage's own limit on captured sources
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
MEMORY_BYTES = 2 * 1024 * 1024 * 1024  # address space of cc1plus; a normal file needs well under 200 MiB
UNPRIVILEGED_UID = 65532
_STD = re.compile(r"-std=(?:c|gnu)\+\+(?:17|1z|20|2a|23|2b|26|2c)")
_INCLUDE_NAMES = r"(?:include_next|include|import|embed)\b"
_DEFINE = re.compile(r"-([DU])([A-Za-z_][A-Za-z0-9_]*)(?:=([A-Za-z0-9_.+-]*))?")
_UCN = re.compile(r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_INCLUDE_WORD = re.compile(_INCLUDE_NAMES)
_INCLUDE_LINE = re.compile(rf"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*{_INCLUDE_NAMES}[^\n]*", re.M)
_HASH = re.compile(r"#|%:")
# What the comment stripper stops at: newlines, comments, literals (with their prefixes) and numbers, whose
# digit separators (`1'000`) are no character literals.
_WORD_CHAR = r"A-Za-z0-9_$\x80-\U0010ffff"
_LEX = re.compile(
    rf"\n|//|/\*|(?<![{_WORD_CHAR}])(?:u8R|uR|UR|LR|u8|R|u|U|L)[\"']|[\"']"
    rf"|(?<![{_WORD_CHAR}])\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.'])*"
)
_FILE_PROBES = re.compile(r"\b__has_(?:include_next|include|embed)(?:__)?\b")
_DEPENDENCY = re.compile(r"\bdependency\b")
_PASTE = re.compile(r"##|%:%:")
_PROBE = "__evalsvc_has_include"


class PreprocessError(Exception):
    """The preprocessor failed, ran too long or wrote too much; the message says which."""


def preprocess(text: str, flags: list[str], cuda: bool, timeout_s: float = 10.0) -> str:
    """`g++ -E` over hostile text, with its file-reading directives removed: the text the compiler will
    read, with `# N "<stdin>"` line markers. `flags` are the load_inline flags of that source (extra_cflags,
    or extra_cuda_cflags for CUDA): their -D/-U, -std and the flags that set predefined macros are used."""
    source = neutralise(text)
    data = source.encode("utf-8", errors="surrogateescape")
    if len(data) > MAX_INPUT_BYTES:
        raise PreprocessError(f"the source is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    compiler = shutil.which("g++")
    limiter = shutil.which("prlimit")
    if compiler is None or limiter is None:
        raise PreprocessError("g++ and prlimit are needed to preprocess sources and one is missing")
    argv = [compiler, "-E", "-x", "c++", "-nostdinc", "-nostdinc++", "-w", *cpp_flags(flags, cuda), "-"]
    out, err, rc = _run([limiter, *_limits(timeout_s), "--", *argv], data, timeout_s)
    if len(out) >= MAX_OUTPUT_BYTES:
        raise PreprocessError(f"the preprocessed text is larger than {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB")
    if rc != 0:
        raise PreprocessError(f"the preprocessor failed (exit {rc}): {_first_lines(err)}")
    return out.decode("utf-8", errors="replace")


def neutralise(text: str) -> str:
    """The text with nothing left that makes cpp read, probe or name a file; lines keep their numbers."""
    text = join_splices(text)
    for _ in range(8):  # `\\u0075...` decodes into a new universal character name: decode until none is left
        decoded = _UCN.sub(_ascii_ucn, text)
        if decoded == text:
            break
        text = decoded
    else:
        raise PreprocessError("universal character names nested too deeply to read")
    text = _blank_include_hashes(_INCLUDE_LINE.sub("", _strip_comments(text)))
    text = _FILE_PROBES.sub(_PROBE, text)
    text = _DEPENDENCY.sub("__evalsvc_dependency", text)
    return _PASTE.sub(" ", text)


def cpp_flags(flags: list[str], cuda: bool) -> list[str]:
    """The preprocessor's flags: our fixed ones, then -D/-U, -std (C++17 or newer) and the flags that only
    set predefined macros (`-O3` -> `__OPTIMIZE__`, `-fopenmp` -> `_OPENMP`, `-mavx2` -> `__AVX2__`), taken
    from the load_inline flags; for CUDA the host flags inside `-Xcompiler` too. Anything else is left out."""
    words = [w for w in split_flags(flags) if w]
    if cuda:
        words += [o for w, v in itertools.pairwise([*words, ""]) for o in _host_options(w, v)]
    std = next((w for w in reversed(words) if _STD.fullmatch(w)), "-std=c++17")
    out = [std, f"-D{_PROBE}(...)=0"] + (["-D__CUDACC__", "-D__NVCC__"] if cuda else [])
    out += [w for w in words if sets_predefined_macros(w)]
    for w, value in itertools.pairwise([*words, ""]):
        m = _DEFINE.fullmatch(w + value if w in ("-D", "-U") else w)
        if m and m.group(2) != _PROBE and not (m.group(1) == "U" and m.group(3) is not None):
            out.append(f"-{m.group(1)}{m.group(2)}" + ("" if m.group(3) is None else f"={m.group(3)}"))
    return list(dict.fromkeys(out))


def _host_options(word: str, value: str) -> list[str]:
    """nvcc's `-Xcompiler -fopenmp,-O3` / `--compiler-options=-mavx2`: the host flags it passes on."""
    name, eq, inline = word.partition("=")
    if name not in ("-Xcompiler", "--compiler-options"):
        return []
    return (inline if eq else value).split(",")


def _ascii_ucn(m: re.Match[str]) -> str:
    """`\\u0074` -> `t`: universal character names of identifier characters, which cpp reads as the letter."""
    char = decode_ucns(m.group())
    return char if re.fullmatch(r"[A-Za-z0-9_$]", char) else m.group()


def _strip_comments(text: str) -> str:
    """Comments replaced by a space, as cpp does, with the newlines of block comments moved to the end of
    their logical line so that every line keeps its number; literals (`"/*"`, `R"(//)"`) and numbers
    (`1'000`) are copied as they are."""
    out: list[str] = []
    pos, owed, n = 0, 0, len(text)
    while (m := _LEX.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        tok = m.group()
        if tok == "\n":
            out.append("\n" * (owed + 1))
            owed, pos = 0, m.end()
        elif tok in ("//", "/*"):
            end = text.find("\n" if tok == "//" else "*/", m.end())
            end = n if end < 0 else end + (0 if tok == "//" else 2)
            owed += text.count("\n", m.start(), end)
            out.append(" ")
            pos = end
        elif tok[-1] in "\"'":
            pos = literal_end(text, m.end() - 1, tok[:-1].endswith("R"))
            out.append(text[m.start() : pos])
        else:
            out.append(tok)
            pos = m.end()
    out.append(text[pos:] + "\n" * owed)
    return "".join(out)


def _blank_include_hashes(text: str) -> str:
    """Every `#` or `%:` that, past spaces and comments, is followed by an include-like name is blanked,
    wherever it is (in a literal, or somewhere cpp reads otherwise than the stripper); one followed by more
    than a few comments is blanked too. Each `#` is looked past for a bounded stretch: linear time."""
    out, pos = [], 0
    for m in _HASH.finditer(text):
        if _names_include(text, m.end()):
            out.append(text[pos : m.start()] + " " * len(m.group()))
            pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _names_include(text: str, j: int) -> bool:
    for _ in range(8):
        while j < len(text) and text[j] in " \t\f\v\r\n":
            j += 1
        if not text.startswith("/*", j):
            return _INCLUDE_WORD.match(text, j) is not None
        end = text.find("*/", j + 2, j + 512)
        if end < 0:
            return True  # a long or unclosed comment: assume the worst
        j = end + 2
    return True


def _limits(timeout_s: float) -> list[str]:
    cpu = max(1, math.ceil(timeout_s)) + 1
    return [f"--cpu={cpu}", f"--as={MEMORY_BYTES}", f"--fsize={MAX_OUTPUT_BYTES}", "--core=0", "--nofile=64"]


def _run(argv: list[str], data: bytes, timeout_s: float) -> tuple[bytes, bytes, int]:
    """Run with the source on stdin, stdout and stderr to files (capped by the file-size limit), as an
    unprivileged user when we are root; kill the whole process group at the timeout."""
    root_user = os.geteuid() == 0
    as_user: dict[str, Any] = (
        {"user": UNPRIVILEGED_UID, "group": UNPRIVILEGED_UID, "extra_groups": []} if root_user else {}
    )
    with tempfile.TemporaryDirectory(prefix="evalsvc-cpp-") as tmp:
        root = Path(tmp)
        root.chmod(0o711)  # the unprivileged child reaches its working directory, nothing else here
        cwd = root / "cwd"
        cwd.mkdir(mode=0o555)
        (root / "in").write_bytes(data)
        with (
            open(root / "in", "rb") as stdin,
            open(root / "out", "w+b") as stdout,
            open(root / "err", "w+b") as stderr,
        ):
            try:
                proc = subprocess.Popen(
                    argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env={}, close_fds=True,
                    start_new_session=True, **as_user,
                )  # fmt: skip
            except OSError as e:
                raise PreprocessError(f"the preprocessor could not start: {e}") from e
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise PreprocessError(
                    f"the preprocessor ran past its {timeout_s:g} s limit (a macro that expands without end?)"
                ) from None
            stdout.seek(0)
            stderr.seek(0)
            return stdout.read(MAX_OUTPUT_BYTES), stderr.read(4096), rc


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _first_lines(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    return " / ".join(lines[:3])[:1000] or "no message"
