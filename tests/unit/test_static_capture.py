"""load_inline calls read from a solution's text (evalsvc/compiler/static_capture.py): the same calls the
capture sandbox's import records, or None where the text cannot be read for certain."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsvc.compiler.entry import capture_inline_calls
from evalsvc.compiler.static_capture import static_calls

ROOT = Path(__file__).parents[2]
SOLUTIONS = sorted(
    p
    for p in [*ROOT.glob("evalsvc/examples/*/*/*.py"), *ROOT.glob("tests/corpus/honest/*.py")]
    if "load_inline" in p.read_text()
)

HEAD = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
src = "torch::Tensor f(torch::Tensor x) { return x; }"
"""
CALL = 'ext = load_inline(name="m", cpp_sources=[src], functions=["f"])\n'


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_static_read_equals_what_the_import_captures(path: Path) -> None:
    static = static_calls(path.read_text())
    if static is None:
        pytest.skip("not readable statically: captured in the sandbox")
    assert [c.key for c in static] == [c.key for c in capture_inline_calls(path)]


def test_most_honest_solutions_are_read_statically() -> None:
    read = [p for p in SOLUTIONS if static_calls(p.read_text()) is not None]
    assert len(read) >= 0.8 * len(SOLUTIONS), sorted(set(SOLUTIONS) - set(read))


def test_plain_module_is_read() -> None:
    text = (
        HEAD
        + 'flags = ["-O3"]\n'
        + CALL.replace(")\n", ", extra_cflags=flags + ['-DX'])\n")
        + (
            "class ModelNew(nn.Module):\n"
            '    """doc"""\n'
            "    def __init__(self, scale: float = 2.0) -> None:\n"
            "        super().__init__()\n"
            "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
            "        return ext.f(x)\n"
            'if __name__ == "__main__":\n'
            "    print(1)\n"
        )
    )
    (call,) = static_calls(text) or []
    assert call.name == "m" and call.functions == {"f": "f"} and call.extra_cflags == ["-O3", "-DX"]
    assert call.cpp_sources == ["torch::Tensor f(torch::Tensor x) { return x; }"]


@pytest.mark.parametrize(
    "text",
    [
        HEAD + "import os\n" + CALL,  # a module not on the plain list
        HEAD + "load_inline = print\n" + CALL,  # the loader rebound
        HEAD + "torch.manual_seed(0)\n" + CALL,  # a call that is not load_inline
        HEAD + 'src = src.replace("x", "y")\n' + CALL,  # a value computed by a call
        HEAD + "def build():\n    return load_inline(name='m', cpp_sources=[src])\next = build()\n",
        HEAD + CALL + "class M(nn.Module):\n    def f(self):\n        load_inline(name='n')\n",
        HEAD + "@torch.no_grad()\ndef g():\n    pass\n" + CALL,  # a decorator runs at import
        HEAD + "def g(x=print('hi')):\n    pass\n" + CALL,  # a default runs at import
        HEAD + "def g(x: print('hi')):\n    pass\n" + CALL,  # so does an annotation
        HEAD + "try:\n    pass\nexcept Exception:\n    pass\n" + CALL,
        HEAD + "from .helpers import k\n" + CALL,
        HEAD + "s = 'a' * 10\n" + CALL,
        HEAD + "class M(object):\n    pass\n" + CALL,  # a base that is not torch's
        HEAD + 'ext = load_inline(name="m", cpp_sources=[src], **{"functions": ["f"]})\n',
        HEAD + 'ext = load_inline(name="bad name", cpp_sources=[src])\n',  # load_inline refuses it
        HEAD,  # no load_inline at all: the sandbox says so
        "def broken(:\n",
    ],
)
def test_anything_else_is_left_to_the_sandbox(text: str) -> None:
    assert static_calls(text) is None


def test_doubled_strings_are_bounded() -> None:
    lines = ["a0 = 'xxxxxxxxxxxxxxxx'"] + [f"a{i + 1} = a{i} + a{i}" for i in range(40)]
    assert static_calls(HEAD + "\n".join(lines) + "\n" + CALL) is None  # 16 * 2**40 chars: never built


def test_shared_lists_doubled_are_bounded() -> None:
    """Red team 8: `L{i} = [L{i-1}, L{i-1}]` for 48 lines is 2**48 items deep, not 48 lines of work."""
    lines = ["L0 = ['x']"] + [f"L{i + 1} = [L{i}, L{i}]" for i in range(48)]
    assert static_calls(HEAD + "\n".join(lines) + "\n" + CALL) is None


def test_the_sum_of_values_read_is_bounded() -> None:
    """Red team 8: many values each under the per-value bound (4-byte characters, doubled to 32 MiB)."""
    lines = ['S0 = "\\U0001F600"'] + [f"S{i + 1} = S{i} + S{i}" for i in range(21)]
    lines += [f"A{i} = S21 + S21" for i in range(200)]
    assert static_calls(HEAD + "\n".join(lines) + "\n" + CALL) is None


def test_a_foreign_coding_line_is_left_to_the_screens() -> None:
    assert static_calls("# -*- coding: utf-7 -*-\n" + HEAD + CALL) is None
