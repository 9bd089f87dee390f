"""Triton solutions: which functions are kernels, and the Triton-specific tricks a source shows.

A `@triton.jit` body is Triton's own language, compiled for the device: forward's torch rules do not apply
inside it (screening.forward does not follow a launch into it), the global rules still do. The name rules
of screening.python let through only the kernel language and the decorators that define and launch kernels
(`triton.jit`, `triton.autotune`, `triton.Config`, `triton.heuristics`, `triton.cdiv`,
`triton.next_power_of_2`, `triton.language`); Triton's runtime, compiler, knobs and `triton.testing`
(do_bench) are refused as the harness's. Here, rule `triton-hook`: Python that the autotuner or a launch
would run around the kernel (pre/post hooks, a benchmark function of the solution's own, a pruning
function or performance model, launch metadata), and patching a kernel object.
"""

from __future__ import annotations

import ast

from evalsvc.core.rules import TORCH_COMPUTE_IN_FORWARD
from evalsvc.screening.python import Module, Program, qual, root_name, src

TRITON_HOOK = "triton-hook"
KERNEL_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
# Keywords of triton.jit / autotune / Config / heuristics that hand Triton a Python callable to run.
HOOK_KEYWORDS = {"pre_hook", "post_hook", "prune_configs_by", "perf_model", "early_config_prune", "do_bench",
                 "launch_metadata", "repr"}  # fmt: skip
# Attributes of Triton's kernel and autotuner objects through which Python runs around a launch or bench.
HOOK_ATTRS = {"pre_hook", "post_hook", "add_pre_run_hook", "pre_run_hooks", "launch_metadata", "do_bench",
              "_do_bench", "_bench", "device_caches", "used_global_vals", "early_config_prune",
              "perf_model"}  # fmt: skip
_WHY = "runs the solution's Python around a launch or the autotuner's benchmark (timing, outputs)"


def decorator_name(d: ast.AST, mod: Module) -> str | None:
    """`@triton.jit`, `@triton.jit(...)`, `@triton.autotune(...)` -> the decorator's resolved name."""
    return qual(d.func if isinstance(d, ast.Call) else d, mod)


def is_kernel(node: ast.AST, mod: Module) -> bool:
    """A function decorated by triton.jit (directly or under autotune/heuristics): device code."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return any(decorator_name(d, mod) in KERNEL_DECORATORS for d in node.decorator_list)


class TritonScan(ast.NodeVisitor):
    """Triton-specific tricks anywhere in one file of the solution."""

    def __init__(self, prog: Program, mod: Module) -> None:
        self.prog, self.mod = prog, mod
        self.kernels = {n for n, d in mod.defs.items() if is_kernel(d, mod)}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if is_kernel(node, self.mod):  # in the interpreter a kernel body is Python: torch in it computes
            for n in ast.walk(node):
                q = qual(n, self.mod) if isinstance(n, ast.Name | ast.Attribute) else None
                if q and q.split(".")[0] == "torch" and isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
                    why = f"`{src(n)}` inside the Triton kernel `{node.name}`: kernels are Triton's language"
                    self.prog.hit(TORCH_COMPUTE_IN_FORWARD, self.mod, n, why)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        q = qual(node.func, self.mod) or ""
        if q.startswith("triton."):
            for k in node.keywords:
                if k.arg in HOOK_KEYWORDS:
                    why = f"`{k.arg}=` of `{src(node.func)}` {_WHY}"
                    self.prog.hit(TRITON_HOOK, self.mod, node, why)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in HOOK_ATTRS:
            self.prog.hit(TRITON_HOOK, self.mod, node, f"`{src(node)}` {_WHY}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for t in targets:
            root = root_name(t)
            if isinstance(t, ast.Attribute | ast.Subscript) and root is not None and root.id in self.kernels:
                why = f"assigning to `{src(t)}` patches the kernel `{root.id}` (what its launch runs)"
                self.prog.hit(TRITON_HOOK, self.mod, t, why)
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Delete = visit_Assign
