"""`evalsvc batch submit|wait|show`: many evaluations at once against a running service, with a progress
bar while they run."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalsvc.records.documents import BatchRequest, BatchView, EvaluationRequest

if TYPE_CHECKING:
    from evalsvc.sdk import Client

batch_app = typer.Typer(help="Submit, follow and show batches of evaluations on a running service.")

Url = Annotated[str, typer.Option(envvar="EVALSVC_URL")]
ApiKey = Annotated[str | None, typer.Option(envvar="EVALSVC_API_KEY")]
AsJson = Annotated[bool, typer.Option("--json", help="print the batch as the API's JSON")]


def read_requests(path: Path) -> list[EvaluationRequest]:
    """A POST /v1/batches body ({"evaluations": [...]}) or JSON lines of evaluation requests; ValueError
    naming the line that is not one."""
    text = path.read_text()
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None  # JSON lines
    if isinstance(whole, dict) and "evaluations" in whole:
        return BatchRequest.model_validate(whole).evaluations
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(EvaluationRequest.model_validate_json(line))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not an evaluation request: {str(e).splitlines()[0]}") from None
    if not out:
        raise ValueError(f"{path}: no evaluation requests")
    return out


@batch_app.command("submit")
def submit(
    requests: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="batch JSON or JSON lines")],
    url: Url = "http://127.0.0.1:8000",
    api_key: ApiKey = None,
    wait: Annotated[bool, typer.Option(help="follow it to the end with a progress bar")] = False,
    timeout: Annotated[float, typer.Option(help="with --wait: seconds to wait")] = 6 * 3600,
    as_json: AsJson = False,
) -> None:
    """Submit the evaluations of REQUESTS as one batch; prints its id (with --wait, its items at the end)."""
    from evalsvc.cli_exit import CLI_RETRY
    from evalsvc.sdk import Client

    with Client(url, api_key, retry=CLI_RETRY) as client:
        batch_id = client.submit_batch(read_requests(requests))
        if not wait:
            typer.echo(json.dumps({"id": batch_id}) if as_json else batch_id)
            return
        _print(_follow(client, batch_id, timeout), as_json)


@batch_app.command("wait")
def wait_cmd(
    batch_id: str,
    url: Url = "http://127.0.0.1:8000",
    api_key: ApiKey = None,
    timeout: float = 6 * 3600,
    as_json: AsJson = False,
) -> None:
    """Follow a batch to its end with a progress bar on stderr, then print its items."""
    from evalsvc.cli_exit import CLI_RETRY
    from evalsvc.sdk import Client

    with Client(url, api_key, retry=CLI_RETRY) as client:
        _print(_follow(client, batch_id, timeout), as_json)


@batch_app.command("show")
def show(
    batch_id: str, url: Url = "http://127.0.0.1:8000", api_key: ApiKey = None, as_json: AsJson = False
) -> None:
    """Print a batch as it stands."""
    from evalsvc.cli_exit import CLI_RETRY
    from evalsvc.sdk import Client

    with Client(url, api_key, retry=CLI_RETRY) as client:
        _print(client.batch(batch_id), as_json)


def _follow(client: Client, batch_id: str, timeout: float) -> BatchView:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    deadline = time.monotonic() + timeout
    view = client.batch(batch_id)
    columns = (TextColumn(f"batch {batch_id}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("batch", total=view.total, completed=view.done)
        while view.done < view.total and time.monotonic() < deadline:
            view = client.batch(batch_id, wait=min(20.0, max(0.0, deadline - time.monotonic())))
            bar.update(task, completed=view.done)
    return view


def _print(view: BatchView, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(view.model_dump_json(indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"batch {view.id}: {view.done} of {view.total} done")
    for column in ("#", "evaluation", "state", "status", "reward", "speedup eager"):
        table.add_column(column)
    for i, item in enumerate(view.items):
        speedup = "—" if item.speedup_eager is None else f"{item.speedup_eager:.3g}x"
        reward = "—" if item.reward is None else f"{item.reward:g}"
        status = item.status.value if item.status else "—"
        table.add_row(str(i), item.id, item.state.value, status, reward, speedup)
    Console(file=sys.stdout, width=160).print(table)
