"""Rule ids that more than one side applies, defined once here.

The static screen and the compile stage spell their rules kebab-case (`evalsvc.screening.checks.RULES`),
the runner and the judge snake_case; results, tests and docs carry each side's spelling, so a check made
on both sides is one constant here and the runner spells it with `at_runtime`."""

from __future__ import annotations

# PyTorch computing in ModelNew.forward: read from the source (screening.forward) and seen at the
# dispatcher while forward runs (sandboxed.runner).
TORCH_COMPUTE_IN_FORWARD = "torch-compute-in-forward"


def at_runtime(rule: str) -> str:
    """The runner's spelling of a rule id: `torch-compute-in-forward` -> `torch_compute_in_forward`."""
    return rule.replace("-", "_")
