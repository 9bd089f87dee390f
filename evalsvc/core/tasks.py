"""Reference problems (KernelBench format) and their metadata, identified by content hash.

This module only describes a task; loading and running its `Model` is the engine's job.
"""

from __future__ import annotations

import ast
from enum import StrEnum

from pydantic import BaseModel, Field

from evalsvc.core.hashing import content_hash


class InvalidTask(ValueError):
    """The task cannot be evaluated; the message says why."""


class Precision(StrEnum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"


class Arithmetic(StrEnum):
    """What arithmetic a candidate may use on an fp32 task (engine/precision.py checks it)."""

    FP32 = "fp32"  # no reduced-precision inputs: bf16, fp16 and TF32 are refused
    TF32 = "tf32"  # TF32 inputs allowed (tensor cores at TF32), bf16 and fp16 refused
    BF16 = "bf16"  # bf16, fp16 and TF32 inputs allowed
    ANY = "any"  # not checked: the tolerance alone decides

    def allowed(self) -> frozenset[str]:
        return {
            Arithmetic.FP32: frozenset(),
            Arithmetic.TF32: frozenset({"tf32"}),
            Arithmetic.BF16: frozenset({"bf16", "fp16", "tf32"}),
            Arithmetic.ANY: frozenset({"bf16", "fp16", "tf32"}),
        }[self]


class TaskMeta(BaseModel):
    """Per-task options; defaults follow CUDA Agent's verification settings."""

    atol: float = Field(1e-2, gt=0)
    rtol: float = Field(1e-2, ge=0)
    trials: int = Field(5, ge=1, le=100)
    precision: Precision = Precision.FP32
    tf32: bool = False
    allow_vendor_libs: bool = Field(False, description="cuBLAS/cuDNN calls allowed in the candidate")
    compile_mode: str = Field("default", description="torch.compile mode of the baseline")
    relative_check: bool = Field(False, description="compare by norm-relative error (tiny outputs)")
    arithmetic: Arithmetic | None = Field(
        None,
        description="on an fp32 task, what the candidate may compute with: fp32 (no bf16, fp16, TF32 inputs; "
        "the default), tf32 (the default when tf32 is set), bf16 (all three), any (not checked)",
    )

    @property
    def arithmetic_policy(self) -> Arithmetic:
        if self.arithmetic is not None:
            return self.arithmetic
        return Arithmetic.TF32 if self.tf32 else Arithmetic.FP32


class TaskSpec(BaseModel):
    """A reference problem: KernelBench module source plus metadata."""

    source: str = Field(min_length=1, max_length=1_000_000)
    meta: TaskMeta = Field(default_factory=TaskMeta)
    name: str | None = Field(None, max_length=200)

    @property
    def id(self) -> str:
        # Fields added with a None default leave the ids of tasks that do not set them as they were.
        return "t_" + content_hash(self.source, self.meta.model_dump(mode="json", exclude_none=True))

    def check_syntax(self) -> None:
        """Refuse what can be refused without running the module."""
        try:
            tree = ast.parse(self.source)
        except SyntaxError as e:
            raise InvalidTask(f"task source has a syntax error at line {e.lineno}: {e.msg}") from None
        except (RecursionError, MemoryError, ValueError) as e:  # an expression nested past the parser's stack
            raise InvalidTask(
                f"task source does not parse within Python's parser limits ({type(e).__name__}): "
                "an expression or nesting too deep"
            ) from None
        names = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
        names |= {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
        if missing:
            raise InvalidTask(f"task source does not define {', '.join(missing)}")
