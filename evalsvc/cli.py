"""The `evalsvc` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Sandboxed kernel evaluation: compile, check and time CUDA/C++ kernels.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """evalsvc: evaluate kernels locally, or run and use the service."""


@app.command("eval")
def eval_cmd(
    task: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="KernelBench task file")],
    solution: Annotated[Path, typer.Option(exists=True, help="solution .py, or a CUDA Agent directory")],
    device: Annotated[str | None, typer.Option(help="cpu or cuda:N (default: EVALSVC_DEVICE)")] = None,
    meta: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, help="task metadata JSON")] = None,
    trials: Annotated[int | None, typer.Option(help="correctness trials")] = None,
    budget: Annotated[float, typer.Option(help="timing budget per subject, seconds")] = 5.0,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result document as JSON")] = False,
) -> None:
    """Evaluate one solution locally. Exit code 0 when it ran, whatever the verdict."""
    from evalsvc.cli_files import read_solution, read_task
    from evalsvc.core.options import EvalOptions
    from evalsvc.render import render_result
    from evalsvc.sandbox.base import SandboxUnavailable
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_local_pipeline

    overrides = {"device": device} if device else {}
    settings = Settings(**overrides)
    try:
        task_spec = read_task(task, meta)
        sol = read_solution(solution)
        engine = make_local_pipeline(settings)
    except SandboxUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    options = EvalOptions(trials=trials, timing_budget_s=budget, compile_baseline=not no_compile_baseline)
    result = engine.evaluate(task_spec, sol, options)
    if as_json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
    else:
        sys.stdout.write(render_result(result) + "\n")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
