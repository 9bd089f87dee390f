import pytest
from pydantic import ValidationError

from evalsvc.core.solutions import Solution, SolutionFormat
from evalsvc.core.tasks import InvalidTask, TaskMeta, TaskSpec


@pytest.mark.parametrize(
    "bad", ["../x.py", "/etc/passwd.py", "a/../b.py", "x.so", "kernels/.x.cu", "a\\b.py", ""]
)
def test_unsafe_paths_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        Solution(files={bad: "x = 1"})


def test_empty_solution_refused() -> None:
    with pytest.raises(ValidationError, match="empty"):
        Solution(files={"solution.py": "   \n"})


def test_cuda_agent_layout() -> None:
    ok = Solution(
        files={"model_new.py": "x", "kernels/a.cu": "y", "kernels/a_binding.cpp": "z"},
        format=SolutionFormat.CUDA_AGENT,
    )
    assert ok.entry == "model_new.py"
    with pytest.raises(ValidationError, match="environment"):
        Solution(files={"model_new.py": "x", "kernels/a.cu": "y", "binding.cpp": "z"}, format="cuda_agent")


def test_ids_are_content_hashes() -> None:
    a = Solution.single_file("print(1)")
    assert a.id == Solution.single_file("print(1)").id != Solution.single_file("print(2)").id
    t = TaskSpec(source="class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    assert t.id != t.model_copy(update={"meta": TaskMeta(atol=1e-3)}).id


def test_task_syntax_and_interface() -> None:
    with pytest.raises(InvalidTask, match="syntax"):
        TaskSpec(source="def (:").check_syntax()
    with pytest.raises(InvalidTask, match="get_inputs"):
        TaskSpec(source="class Model: pass\ndef get_init_inputs(): return []\n").check_syntax()


@pytest.mark.parametrize("other", ["./solution.py", "solution.py/.", ".//solution.py"])
def test_two_names_for_one_file_are_refused(other: str) -> None:
    with pytest.raises(ValidationError, match=r"two files name 'solution\.py'"):
        Solution(files={"solution.py": "x = 1\n", other: "x = 2\n"})
