"""The C preprocessor on hostile text, on the trusted side: the real `g++ -E`, no mocks.

What it must do (expand macros, join splices, keep line numbers) and what it must never do (read a file,
run without bound). "Never reads a file" is tested with a FIFO: opening one for reading blocks until a
writer comes, so a preprocessor that opened it would hang until the timeout instead of returning.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from evalsvc.compiler.preprocess import MAX_INPUT_BYTES, PreprocessError, cpp_flags, neutralise, preprocess
from evalsvc.screening.native import tokenize

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("prlimit") is None, reason="needs g++ and prlimit"
)


def _code(text: str) -> str:
    """The preprocessed text without line markers and blank lines."""
    return "\n".join(ln for ln in text.splitlines() if ln.strip() and not ln.startswith("# "))


def test_macros_from_the_source_and_the_flags_are_expanded() -> None:
    src = "#define KNS at\n#define CALL(f, x) f(x)\n"
    src += "auto a = KNS::cpu::mm(x, y);\nauto b = CALL(FLAGNS::relu, x);\n"
    out = _code(preprocess(src, ["-DFLAGNS=torch", "-O3"], cuda=False))
    assert "auto a = at::cpu::mm(x, y);" in out
    assert "auto b = torch::relu(x);" in out


def test_flags_split_on_spaces_and_separate_values() -> None:
    src = "int a = A; int b = B; int c = C;\n"
    assert "int a = 1; int b = 2; int c = 3;" in preprocess(src, ["-DA=1 -DB=2", "-D", "C=3"], cuda=False)


def test_splices_are_joined() -> None:
    out = preprocess("auto y = a\\\nt::cpu::_softmax(x, 1, false);\n", [], cuda=False)
    assert "at::cpu::_softmax(x, 1, false)" in out


def test_line_markers_map_back_to_the_original_lines() -> None:
    src = "#include <torch/extension.h>\n/* two\n   lines */\n#define K at\n" + "\n" * 20  # cpp: a marker
    src += "auto y = K::relu(x);\n"
    toks = [t for t in tokenize(preprocess(src, [], cuda=False)) if t.text == "relu"]
    assert [t.line for t in toks] == [src.count("\n")]


def test_cuda_sources_get_a_host_pass() -> None:
    src = "#ifdef __CUDACC__\nint host_pass;\n#endif\n#ifdef __CUDA_ARCH__\nint device_pass;\n#endif\n"
    assert "host_pass" in preprocess(src, [], cuda=True)
    out = preprocess(src, [], cuda=True)
    assert "device_pass" not in out
    assert "host_pass" not in preprocess(src, [], cuda=False)


def test_flags_that_set_predefined_macros() -> None:
    src = "#ifdef _OPENMP\nint omp;\n#endif\n#ifdef __OPTIMIZE__\nint opt;\n#endif\nlong v = __cplusplus;\n"
    out = preprocess(src, ["-O3", "-fopenmp", "-std=c++20"], cuda=False)
    assert "int omp;" in out and "int opt;" in out and "long v = 202002L;" in out
    cu = preprocess(src, ["-O3", "-Xcompiler", "-fopenmp"], cuda=True)
    assert "int omp;" in cu


def test_only_macro_flags_reach_the_preprocessor() -> None:
    given = ["-I/etc", "-include", "/etc/passwd", "-DX=1", "-DKNS=at", "-std=c++14", "-Wl,-x", "-O2"]
    flags = cpp_flags(given, False)
    assert flags[0] == "-std=c++17"  # a standard before C++17 is not taken
    assert "-DX=1" in flags and "-DKNS=at" in flags and "-O2" in flags
    assert not [f for f in flags if f.startswith(("-I", "-include", "-W", "/"))]
    assert cpp_flags(["-DX=$(id)", "-D'Y=1'"], False)[2:] == []


def test_an_include_of_etc_passwd_leaves_no_trace() -> None:
    src = "\n".join([
        "#include </etc/passwd>",
        '#  include "/etc/passwd"',
        '%:include "/etc/passwd"',
        '# /* comment */ include "/etc/passwd"',
        '#inc\\\nlude "/etc/passwd"',
        '#incl\\u0075de "/etc/passwd"',
        '#include_next "/etc/passwd"',
        '#import "/etc/passwd"',
        '/*\n*/ #include "/etc/passwd"',
        "int after;",
    ])  # fmt: skip
    out = preprocess(src, [], cuda=False)
    assert "root:" not in out and "passwd" not in out
    assert "int after;" in out


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A FIFO that an unprivileged preprocessor could open: opening it for reading blocks."""
    tmp_path.chmod(0o755)
    path = tmp_path / "fifo"
    os.mkfifo(path)
    path.chmod(0o666)
    return path


OPENERS = [
    '#include "{f}"',
    '#include_next "{f}"',
    '#pragma GCC dependency "{f}"',
    '_Pragma("GCC dependency \\"{f}\\"")',
    '#define S(x) _Pragma(#x)\n#define P(x) S(x)\n#define Q(a, b) a##b\nP(GCC Q(depend, ency) "{f}")',
    '_Pragma("GCC dependenc\\\\u0079 \\"{f}\\"")',
    '#if __has_include("{f}")\nint found;\n#endif',
    '#define H __has_inc\\u006cude\n#if H("{f}")\nint found;\n#endif',
    '#define C(a, b) a##b\n#if C(__has_, include)("{f}")\nint found;\n#endif',
    'const char* s = R"(\n#/**/include "{f}"\n)";',
]


@pytest.mark.parametrize("template", OPENERS)
def test_no_file_is_ever_opened(template: str, fifo: Path) -> None:
    """It returns (or fails on what is left of the directive) at once: it did not wait on the FIFO."""
    start = time.monotonic()
    try:
        out = preprocess(template.format(f=fifo), [], cuda=False, timeout_s=5)
    except PreprocessError as e:
        assert "limit" not in str(e)
    else:
        assert "int found;" not in out  # __has_include answers 0
    assert time.monotonic() - start < 4


def test_a_macro_bomb_is_stopped_within_the_timeout() -> None:
    bomb = "#define A0 x x x x x x x x\n"
    bomb += "".join(f"#define A{i} A{i - 1} A{i - 1} A{i - 1} A{i - 1}\n" for i in range(1, 40))
    start = time.monotonic()
    with pytest.raises(PreprocessError, match=r"limit|larger"):
        preprocess(bomb + "A39\n", [], cuda=False, timeout_s=2)
    assert time.monotonic() - start < 6


def test_too_large_an_input_is_refused() -> None:
    with pytest.raises(PreprocessError, match="larger"):
        preprocess("int x;\n" * (MAX_INPUT_BYTES // 7 + 1), [], cuda=False)


BROKEN = [
    "int f( {",
    "/* never closed",
    '"never closed',
    "#if 1\nint x;\n",  # unterminated conditional
    "#error stop here",
    "#define F(a) a\nF(1, 2",
    'R"a b(raw with a bad delimiter)a b"',
    bytes(range(1, 128)).decode("ascii") * 10,
    "\\",
]


@pytest.mark.parametrize("text", BROKEN, ids=lambda t: repr(t[:20]))
def test_broken_input_returns_or_raises_cleanly(text: str) -> None:
    try:
        out = preprocess(text, [], cuda=False)
    except PreprocessError as e:
        assert str(e)
    else:
        assert isinstance(out, str)


def test_the_environment_is_not_passed_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GCC reads CPATH and writes DEPENDENCIES_OUTPUT when they are set: with an empty environment neither."""
    tmp_path.chmod(0o777)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "h.h").write_text("int from_cpath;\n")
    monkeypatch.setenv("CPATH", str(tmp_path / "inc"))
    monkeypatch.setenv("DEPENDENCIES_OUTPUT", str(tmp_path / "deps.txt"))
    out = preprocess("#if __has_include(<h.h>)\nint seen;\n#endif\nint x;\n", [], cuda=False)
    assert "seen" not in out and "int x;" in out
    assert not (tmp_path / "deps.txt").exists()


def test_neutralise_keeps_line_numbers() -> None:
    src = "a\\\nb\n/* x\ny */ c\n#include <x>\nd\n"
    assert neutralise(src).count("\n") == src.count("\n")
    assert neutralise(src).splitlines()[5] == "d"
