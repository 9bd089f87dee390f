"""The `evalsvc` command line."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from evalsvc.cli_batch import batch_app
from evalsvc.cli_gate import gate_cmd
from evalsvc.cli_pools import suites_app, tasks_app

app = typer.Typer(
    help="Sandboxed kernel evaluation: compile, check and time CUDA/C++ kernels.\n\n"
    "Exit codes: 0 ran (whatever the verdict); 1 `gate`: an expectation failed; 2 usage error; "
    "3 could not run (device missing, service or Redis unreachable, internal error).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


app.add_typer(tasks_app, name="tasks")
app.add_typer(suites_app, name="suites")
app.add_typer(batch_app, name="batch")
app.command("gate")(gate_cmd)


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        typer.echo(f"evalsvc {version('evalsvc')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback when a command fails")] = False,
) -> None:
    """evalsvc: evaluate kernels locally, or run and use the service."""


def main() -> None:
    """The `evalsvc` command: a failure ends in one or two lines and an exit code that says what kind it
    was (cli_exit), a traceback only with --debug or EVALSVC_DEBUG=1."""
    from evalsvc.cli_exit import explain

    debug = "--debug" in sys.argv[1:] or os.environ.get("EVALSVC_DEBUG") == "1"
    if not debug:  # each retry of a request would be a line; the failure, if it comes, is said once
        logging.getLogger("evalsvc.sdk").setLevel(logging.ERROR)
    try:
        app()
    except Exception as e:
        if debug:
            raise
        code, lines = explain(e)
        for line in lines:
            typer.echo(line, err=True)
        sys.exit(code)


@app.command("eval")
def eval_cmd(
    task: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="KernelBench task file")],
    solution: Annotated[Path, typer.Option(exists=True, help="solution .py, or a CUDA Agent directory")],
    device: Annotated[str | None, typer.Option(help="cpu or cuda:N (default: EVALSVC_DEVICE)")] = None,
    meta: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, help="task metadata JSON")] = None,
    trials: Annotated[int | None, typer.Option(help="correctness trials")] = None,
    budget: Annotated[float, typer.Option(help="timing budget per subject, seconds")] = 5.0,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline")] = False,
    profile: Annotated[bool, typer.Option("--profile", help="profile the candidate after timing it")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result document as JSON")] = False,
    show_progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="stages on stderr (default: not with --json)"),
    ] = None,
) -> None:
    """Evaluate one solution locally, in the data directory EVALSVC_DATA_DIR (default /var/lib/evalsvc), the
    one every command uses. Exit 0 when it ran, whatever the verdict; 3 when it could not run
    here (the device is not on this machine, the sandbox cannot start, an internal error)."""
    from evalsvc.cli_exit import COULD_NOT_RUN, require_device, result_json
    from evalsvc.cli_files import read_solution, read_task
    from evalsvc.cli_progress import stages_on_stderr
    from evalsvc.core.options import EvalOptions
    from evalsvc.core.results import Status
    from evalsvc.render import render_result
    from evalsvc.settings import Settings
    from evalsvc.wiring import make_local_pipeline

    settings = Settings(device=device) if device else Settings()
    require_device(settings.device)
    task_spec = read_task(task, meta)
    sol = read_solution(solution)
    options = EvalOptions(
        trials=trials, timing_budget_s=budget, compile_baseline=not no_compile_baseline, profile=profile
    )
    with stages_on_stderr(not as_json if show_progress is None else show_progress):
        engine = make_local_pipeline(settings)
        try:
            result = engine.evaluate(task_spec, sol, options)
        finally:
            engine.evaluator.judge.close()
    sys.stdout.write((result_json(result, None, "done") if as_json else render_result(result)) + "\n")
    if result.status is Status.INTERNAL_ERROR:
        raise typer.Exit(COULD_NOT_RUN)


@app.command()
def serve(host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> None:
    """Run the HTTP gateway (uvicorn)."""
    from evalsvc.api.server import serve as serve_gateway
    from evalsvc.settings import Settings

    settings = Settings(http_host=host, http_port=port, http_workers=max(workers, 1))
    serve_gateway(settings, log_level="warning" if workers <= 1 else None)  # the CLI's one process is quiet


@app.command()
def worker(
    kind: Annotated[str, typer.Argument(help="compile or gpu")],
    device: Annotated[str, typer.Option(help="gpu workers: cpu or cuda:N")] = "cpu",
    queue: Annotated[str | None, typer.Option(help="gpu workers: queue name (default gpu.<uuid>)")] = None,
    device_class: Annotated[str | None, typer.Option(help="gpu workers: class, e.g. H200")] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            help="compile workers: parallel jobs (default: cores); gpu workers: evaluations in flight on "
            "the device, timed one at a time (default 4 on a GPU, 1 on the CPU device)",
            min=1,
            max=8,
        ),
    ] = None,
) -> None:
    """Run a Celery worker: `compile` (CPU, Docker sandbox) or `gpu` (one device, several evaluations in
    flight that share it for untimed work and take it alone for timing)."""
    import os
    import socket

    if kind not in ("compile", "gpu"):
        raise typer.BadParameter("kind must be 'compile' or 'gpu'")
    host = socket.gethostname()
    if kind == "gpu":
        queue = queue or (f"gpu.cpu-{host}" if device == "cpu" else f"gpu.{_gpu_uuid(device)}")
        device_class = device_class or ("cpu" if device == "cpu" else _gpu_class(device))
        os.environ.update(
            EVALSVC_DEVICE=device, EVALSVC_WORKER_QUEUE=queue, EVALSVC_DEVICE_CLASS=device_class
        )
    os.environ["EVALSVC_WORKER_KIND"] = kind
    os.environ.setdefault("EVALSVC_WORKER_NAME", f"{kind}-{queue or 'compile'}@{host}")
    from evalsvc.queues import COMPILE_QUEUE

    argv = [
        "--loglevel",
        "INFO",
        "-n",
        os.environ["EVALSVC_WORKER_NAME"],
        "--without-gossip",
        "--without-mingle",
    ]
    if kind == "gpu":
        inflight = concurrency or (1 if device == "cpu" else 4)
        argv += ["-Q", queue or "", "-P", "threads", "-c", str(inflight)]
    else:
        argv += ["-Q", COMPILE_QUEUE, "-c", str(concurrency or os.cpu_count() or 1)]
    # The worker's own process (workers.main), so that evalsvc imports nothing of workers.
    os.execv(sys.executable, [sys.executable, "-m", "workers.main", *argv])


def _gpu_uuid(device: str) -> str:
    from evalsvc.stack import visible_gpus

    idx = int(device.split(":")[1]) if ":" in device else 0
    uuids = visible_gpus()
    return uuids[idx] if idx < len(uuids) else f"cuda{idx}"


def _gpu_class(device: str) -> str:
    import pynvml

    try:
        pynvml.nvmlInit()
        idx = int(device.split(":")[1]) if ":" in device else 0
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(idx))
        name = name.decode() if isinstance(name, bytes) else name
        return name.replace("NVIDIA ", "").split()[0]
    except Exception:
        return "cuda"


@app.command()
def up(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="state, logs, artifacts (default: EVALSVC_DATA_DIR, else /var/lib/evalsvc)"),
    ] = None,
    port: int = 8000,
    redis_url: Annotated[
        str | None, typer.Option(help="where the stack's Redis listens (default: EVALSVC_REDIS_URL)")
    ] = None,
    use_running_redis: Annotated[
        bool, typer.Option(help="keep jobs in a Redis already at --redis-url that is not this stack's")
    ] = False,
    metrics_port: Annotated[
        int, typer.Option(help="the compile worker's exporter; device workers: next")
    ] = 9101,
    prometheus_port: Annotated[int, typer.Option(help="Prometheus, when installed")] = 9090,
    demo: Annotated[bool, typer.Option(help="evaluate a bundled example through the API")] = True,
    exit_after_demo: Annotated[bool, typer.Option(help="stop everything after the demo")] = False,
) -> None:
    """Start Redis, the gateway, a compile worker and one worker per GPU (a CPU worker without one), and
    keep them running: a child that exits is started again. SIGTERM or SIGINT stops every child. Secrets
    (EVALSVC_API_KEYS, EVALSVC_REDIS_URL, from the environment or EVALSVC_SECRETS_DIR) reach each child as
    files, only those it needs."""
    import logging
    import signal
    import time

    from evalsvc.settings import Settings
    from evalsvc.stack import Stack, visible_gpus

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings()
    data_dir = (data_dir or settings.data_dir).resolve()
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    stack = Stack(
        data_dir=data_dir,
        redis_url=redis_url or settings.redis_url,
        port=port,
        metrics_port=metrics_port,
        prometheus_port=prometheus_port,
        api_keys=settings.api_keys,
    )

    def stop_on_signal(signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time: `finally` below does it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    gpus = visible_gpus()
    code = 0
    try:
        stack.start_redis(reuse_foreign=use_running_redis)
        stack.start_services(gpus)
        typer.echo(
            f"starting: redis, gateway :{port}, compile worker, "
            f"{len(gpus) or 'a CPU'} device worker(s); logs in {data_dir / 'logs'}"
        )
        stack.wait_ready()
        typer.echo("ready")
        if demo:
            code = _demo(
                f"http://127.0.0.1:{port}", "cuda" if gpus else "cpu", next(iter(settings.api_keys), None)
            )
        if not exit_after_demo:
            while True:
                stack.supervise()
                time.sleep(1)
    except KeyboardInterrupt as e:
        typer.echo(f"stopping ({e or 'SIGINT'}): every child of this stack", err=True)
    except RuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        code = 3
    finally:
        stack.stop()
    raise typer.Exit(code)


def _demo(base_url: str, device: str, api_key: str | None) -> int:
    from evalsvc.render import render_result
    from evalsvc.sdk import Client
    from evalsvc.suite import example_pair

    task, solution = example_pair("l1/relu", device)
    with Client(base_url, api_key) as client:
        typer.echo(f"evaluating the bundled example l1/relu ({device}) through {base_url} ...")
        view = client.evaluate(task, solution, timeout=1800)
    if view.result is None:
        typer.echo(f"no result (state {view.state})", err=True)
        return 1
    typer.echo(render_result(view.result))
    typer.echo(f"REWARD {view.reward}")
    return 0


@app.command()
def submit(
    task: Annotated[Path, typer.Option(exists=True, dir_okay=False)],
    solution: Annotated[Path, typer.Option(exists=True)],
    url: Annotated[str, typer.Option(envvar="EVALSVC_URL")] = "http://127.0.0.1:8000",
    api_key: Annotated[str | None, typer.Option(envvar="EVALSVC_API_KEY")] = None,
    wait: Annotated[bool, typer.Option(help="wait for the result")] = False,
    device_class: Annotated[str, typer.Option(help="the device class to run on, e.g. H200")] = "default",
    trials: Annotated[int | None, typer.Option(help="correctness trials")] = None,
    budget: Annotated[float, typer.Option(help="timing budget per subject, seconds")] = 5.0,
    no_compile_baseline: Annotated[bool, typer.Option("--no-compile-baseline")] = False,
    profile: Annotated[bool, typer.Option("--profile", help="profile the candidate after timing it")] = False,
    timeout: Annotated[float, typer.Option(help="with --wait: seconds to wait")] = 1800,
    as_json: Annotated[bool, typer.Option("--json", help="print it as `eval --json` does")] = False,
) -> None:
    """Submit a solution to a running service; prints the evaluation id (or the result with --wait)."""
    from evalsvc.cli_exit import CLI_RETRY, result_json
    from evalsvc.cli_files import read_solution, read_task
    from evalsvc.core.options import EvalOptions
    from evalsvc.render import render_result
    from evalsvc.sdk import Client

    options = EvalOptions(
        trials=trials, timing_budget_s=budget, compile_baseline=not no_compile_baseline, profile=profile
    )
    with Client(url, api_key, retry=CLI_RETRY) as client:
        view = client.submit(read_task(task), read_solution(solution), options, device_class)
        if wait:
            view = client.wait(view.id, timeout)
    if as_json:
        typer.echo(result_json(view.result, view.id, view.state.value))
    elif not wait:
        typer.echo(view.id)
    else:
        typer.echo(render_result(view.result) if view.result else f"{view.id}: {view.state.value}")


@app.command("prune-artifacts")
def prune_artifacts_cmd() -> None:
    """Remove the S3 artifact store's artifacts stored longer ago than EVALSVC_S3_RETENTION_DAYS (7): run it
    daily (a cron job or a Kubernetes CronJob) where EVALSVC_ARTIFACT_STORE=s3. Exit 3 when the store
    cannot be reached."""
    from evalsvc.settings import Settings
    from evalsvc.wiring import prune_artifacts

    report = prune_artifacts(Settings())
    typer.echo(
        f"removed {report.removed_keys} artifact keys and {report.removed_blobs} blobs stored before "
        f"{report.cutoff:%Y-%m-%d %H:%M:%S} UTC; kept {report.kept} objects"
    )


@app.command("rl-reward-server")
def rl_reward_server(
    host: str = "127.0.0.1",
    port: int = 5000,
    url: Annotated[str, typer.Option(envvar="EVALSVC_URL")] = "http://127.0.0.1:8000",
    api_key: Annotated[str | None, typer.Option(envvar="EVALSVC_API_KEY")] = None,
    timeout: Annotated[float, typer.Option(help="seconds for one reward request")] = 900,
) -> None:
    """OpenRLHF's remote reward server (--remote_rm_url http://HOST:PORT/get_reward) over the service."""
    import uvicorn

    from evalsvc.rl.judge import RewardConfig
    from evalsvc.rl.openrlhf_server import create_app

    uvicorn.run(create_app(RewardConfig(url=url, api_key=api_key, timeout_s=timeout)), host=host, port=port)


@app.command("wait")
def wait_cmd(
    evaluation_id: str,
    url: Annotated[str, typer.Option(envvar="EVALSVC_URL")] = "http://127.0.0.1:8000",
    api_key: Annotated[str | None, typer.Option(envvar="EVALSVC_API_KEY")] = None,
    timeout: float = 600,
    as_json: Annotated[bool, typer.Option("--json", help="print it as `eval --json` does")] = False,
) -> None:
    """Wait for an evaluation and print its result."""
    from evalsvc.cli_exit import CLI_RETRY, result_json
    from evalsvc.render import render_result
    from evalsvc.sdk import Client

    with Client(url, api_key, retry=CLI_RETRY) as client:
        view = client.wait(evaluation_id, timeout)
    if as_json:
        typer.echo(result_json(view.result, view.id, view.state.value))
    else:
        typer.echo(render_result(view.result) if view.result else f"{view.id}: {view.state.value}")


if __name__ == "__main__":
    main()
