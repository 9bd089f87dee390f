"""Code extraction from completions as models write them: prose, thinking, several fences, truncation,
CUDA Agent trees spread over named blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsvc.core.solutions import SolutionFormat
from evalsvc.rl.extract import extract, fenced_blocks, strip_thinking
from evalsvc.rl.openrlhf import response_of
from evalsvc.rl.trl import completion_text

EXAMPLES = Path(__file__).parents[2] / "evalsvc" / "examples"
OK = (EXAMPLES / "l1" / "relu" / "cpu_ok.py").read_text()
WRONG = (EXAMPLES / "l1" / "relu" / "cpu_wrong.py").read_text()
AGENT = EXAMPLES / "l2" / "gemm_bias_relu" / "cuda_agent"
MODEL_NEW = (AGENT / "model_new.py").read_text()
KERNEL = (AGENT / "kernels" / "gemm_bias_relu.cu").read_text()
BINDING = (AGENT / "kernels" / "gemm_bias_relu_binding.cpp").read_text()


def fence(code: str, info: str = "python", ticks: str = "```") -> str:
    return f"{ticks}{info}\n{code.rstrip()}\n{ticks}"


def single(completion: str) -> str:
    got = extract(completion)
    assert got.solution is not None, got.problem
    assert got.solution.format is SolutionFormat.KERNELBENCH
    return got.solution.files["solution.py"]


def test_fenced_python_in_prose() -> None:
    text = f"Here is my optimized kernel:\n\n{fence(OK)}\n\nIt fuses the ReLU into one pass."
    assert single(text) == OK


@pytest.mark.parametrize("info", ["python", "Python", "py", "python3", ""])
def test_python_fence_tags(info: str) -> None:
    assert single(fence(OK, info)) == OK


def test_tilde_fence_and_longer_backtick_fence() -> None:
    assert single(fence(OK, "python", "~~~")) == OK
    nested = OK.replace("cpp_source = r", "# ``` inside a string is not a fence\ncpp_source = r")
    assert single(fence(nested, "python", "````")) == nested


def test_last_complete_solution_wins() -> None:
    text = f"First try:\n{fence(WRONG)}\nWait, the index is off by one. Fixed:\n{fence(OK)}\n"
    assert single(text) == OK


def test_truncated_last_block_is_ignored() -> None:
    cut = OK[: len(OK) // 2]
    text = f"{fence(OK)}\nA faster version:\n```python\n{cut}"
    assert single(text) == OK


def test_only_a_truncated_block_is_a_format_error() -> None:
    got = extract(f"```python\n{OK[:200]}")
    assert got.solution is None and got.problem


def test_thinking_is_ignored() -> None:
    thinking = f"<think>\nMaybe this:\n{fence(OK)}\nno, let me reconsider.\n</think>\n"
    assert extract(thinking + "I could not finish.").solution is None
    assert single(thinking + f"Final answer:\n{fence(WRONG)}") == WRONG


def test_thinking_opened_in_the_prompt_and_unclosed_thinking() -> None:
    # Qwen3-style templates put <think> in the prompt: the completion holds only the closing tag
    assert single(f"reasoning {fence(WRONG)} more reasoning\n</think>\n{fence(OK)}") == OK
    assert strip_thinking(f"answer\n<think>\n{fence(OK)}") == "answer\n"
    assert extract(f"<think>\nlong reasoning...\n{fence(OK)}").solution is None


def test_helper_block_without_model_new_does_not_replace_the_solution() -> None:
    usage = "model = ModelNew().cuda()\nprint(model(torch.randn(4, 4)))\n"
    text = f"{fence(OK)}\nUse it like this:\n{fence(usage)}"
    assert single(text) == OK


def test_cuda_block_beside_a_python_solution() -> None:
    text = f"The kernel:\n{fence('__global__ void k() {}', 'cuda')}\nThe module:\n{fence(OK)}"
    assert single(text) == OK


@pytest.mark.parametrize(
    "completion",
    [
        "I am not able to write this kernel.",
        "",
        "   \n",
        fence("print('hello')"),
        fence("__global__ void relu(float* x) {}", "cuda"),
        fence("class Model(nn.Module):\n    pass\n"),
    ],
)
def test_no_usable_code(completion: str) -> None:
    got = extract(completion)
    assert got.solution is None and got.problem


def test_bare_python_completion_is_taken() -> None:
    assert single(OK) == OK
    assert extract("class ModelNew(nn.Module):\n    def forward(self x):\n").solution is None


def test_crlf_line_endings() -> None:
    text = f"Here:\r\n```python\r\n{OK}```\r\n"
    assert "class ModelNew" in single(text)


def _tree(completion: str) -> dict[str, str]:
    got = extract(completion)
    assert got.solution is not None, got.problem
    assert got.solution.format is SolutionFormat.CUDA_AGENT
    return got.solution.files


def test_cuda_agent_tree_named_in_info_strings() -> None:
    text = "\n".join(
        [
            "The kernel:",
            fence(KERNEL, "cuda kernels/gemm_bias_relu.cu"),
            "Its binding:",
            fence(BINDING, "cpp kernels/gemm_bias_relu_binding.cpp"),
            "And the module:",
            fence(MODEL_NEW, "python model_new.py"),
        ]
    )
    files = _tree(text)
    assert files == {
        "kernels/gemm_bias_relu.cu": KERNEL.rstrip() + "\n",
        "kernels/gemm_bias_relu_binding.cpp": BINDING.rstrip() + "\n",
        "model_new.py": MODEL_NEW.rstrip() + "\n",
    }


def test_cuda_agent_tree_named_in_prose_and_first_lines() -> None:
    text = "\n".join(
        [
            "**`gemm_bias_relu.cu`**:",
            fence(KERNEL, "cuda"),
            fence("// gemm_bias_relu_binding.cpp\n" + BINDING, "c++"),
            "File: model_new.py",
            fence(MODEL_NEW),
        ]
    )
    files = _tree(text)
    assert set(files) == {"kernels/gemm_bias_relu.cu", "kernels/gemm_bias_relu_binding.cpp", "model_new.py"}


def test_cuda_agent_later_file_replaces_earlier_and_environment_files_are_dropped() -> None:
    first = KERNEL.replace("EPI_BIAS_RELU = 1", "EPI_BIAS_RELU = 0")
    text = "\n".join(
        [
            fence(first, "cuda kernels/gemm_bias_relu.cu"),
            fence(BINDING, "cpp kernels/gemm_bias_relu_binding.cpp"),
            fence("// ours\n", "cpp binding.cpp"),
            fence(MODEL_NEW, "python model_new.py"),
            "Correction to the kernel:",
            fence(KERNEL, "cuda kernels/gemm_bias_relu.cu"),
        ]
    )
    files = _tree(text)
    assert "binding.cpp" not in files and files["kernels/gemm_bias_relu.cu"] == KERNEL.rstrip() + "\n"


def test_single_file_after_a_tree_wins() -> None:
    tree = fence(KERNEL, "cuda kernels/gemm_bias_relu.cu") + "\n" + fence(MODEL_NEW, "python model_new.py")
    assert single(f"{tree}\nSimpler, with load_inline:\n{fence(OK)}") == OK


def test_unsafe_file_names_are_a_format_error_not_an_exception() -> None:
    text = fence(KERNEL, "cuda ../../etc/evil.cu") + "\n" + fence(MODEL_NEW, "python model_new.py")
    got = extract(text)
    assert got.solution is None or all(".." not in k for k in got.solution.files)


def test_fenced_blocks_positions_and_names() -> None:
    blocks = fenced_blocks(f"a\n{fence('x = 1', 'python foo.py')}\nb\n{fence('int y;', 'cpp')}\n")
    assert [(b.lang, b.name) for b in blocks] == [("python", "foo.py"), ("cpp", None)]
    assert blocks[0].end < blocks[1].end


def test_trl_conversational_completions() -> None:
    assert completion_text([{"role": "assistant", "content": fence(OK)}]) == fence(OK)
    blocks = [
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}
    ]
    assert completion_text(blocks) == "x\ny"
    assert (
        completion_text([{"role": "tool", "content": "ignored"}, {"role": "assistant", "content": "z"}])
        == "z"
    )


def test_openrlhf_response_of_query() -> None:
    user = f"Write ModelNew like this example:\n{fence(WRONG)}"
    prompt = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    assert response_of(prompt + "no code, sorry", prompt) == "no code, sorry"
    # decoded without special tokens: the prompt is not a prefix any more; the assistant marker is found
    decoded = "system\n" + prompt + "answer"
    assert response_of(decoded, prompt.replace("<|im_end|>", "")) == "\nanswer"
