"""Every Kubernetes manifest under deploy/ checked against real schemas, offline, and the scaling in them
checked against what the service really exports and serves.

Built-in kinds: kubernetes-validate's strict schemas (Kubernetes' OpenAPI turned into JSON Schema, shipped
in the wheel: no network at test time), for the oldest Kubernetes these files are written for and the newest
the package knows; strict means an unknown field fails, as does a wrong type. Custom resources (KEDA's
ScaledObject, the Prometheus Operator's PrometheusRule): kubernetes-validate takes no schema of ours, so
jsonschema (the library it runs on) checks them against tests/scale/schemas/, minimal schemas written from
each project's documented spec whose Kubernetes parts (ObjectMeta, the HPA's behavior) are Kubernetes'
own strict definitions from the same wheel. A kind with neither schema fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version, major_minor
from referencing import Registry, Resource

from evalsvc.observability.exporter import exposition_registry, start_exporter, worker_collectors
from evalsvc.observability.metrics import WorkerMetrics
from evalsvc.queues import COMPILE_QUEUE
from evalsvc.settings import Settings
from tests.observability.dashboards import exported_names, metric_names

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
SCHEMAS = Path(__file__).parent / "schemas"
# The oldest Kubernetes the files are written for, and the newest kubernetes-validate has schemas of.
KUBERNETES_VERSIONS = ("1.30", major_minor(latest_version()))
# Files under deploy/k8s that `kubectl apply -k deploy/` leaves out on purpose: path (from deploy/) -> why.
EXCLUDED: dict[str, str] = {}
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


def _docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _is_manifest(doc: Any) -> bool:
    """A Kubernetes object; kustomize's own configuration is not one (it is checked below)."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("apiVersion"), str)
        and isinstance(doc.get("kind"), str)
        and not doc["apiVersion"].startswith("kustomize.config.k8s.io/")
    )


def _yaml_files() -> list[Path]:
    return sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])


@cache
def manifests() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(file#index, document) for every Kubernetes object in a YAML file under deploy/ (read once: a test
    that changes one changes a copy)."""
    return tuple(
        (f"{path.relative_to(DEPLOY)}#{i}", doc)
        for path in _yaml_files()
        for i, doc in enumerate(_docs(path))
        if _is_manifest(doc)
    )


def _find(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for _, d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


@cache
def _crd_validator(schema_file: Path, version: str) -> jsonschema.Draft202012Validator:
    """A validator for a custom resource's schema, with Kubernetes' strict definitions of `version`
    (from kubernetes-validate's wheel) reachable by their $id, as the built-in schemas reach them."""
    (folder,) = [
        d
        for d in files("kubernetes_validate").joinpath("kubernetes-json-schema").iterdir()
        if d.name.startswith(f"v{version}.") and d.name.endswith("-local-strict")
    ]
    definitions = Resource.from_contents(json.loads(folder.joinpath("_definitions.json").read_text()))
    schema = json.loads(schema_file.read_text())
    return jsonschema.Draft202012Validator(schema, registry=definitions @ Registry())


def validate(doc: dict[str, Any], version: str) -> None:
    """Raise jsonschema.ValidationError if `doc` breaks its schema (kubernetes_validate.SchemaNotFoundError
    if it has none)."""
    crd = SCHEMAS / f"{doc['kind'].lower()}-{doc['apiVersion'].replace('/', '-')}.json"
    if crd.is_file():
        _crd_validator(crd, version).validate(doc)
    else:
        kubernetes_validate.validate(doc, version, strict=True)


# -- every manifest, every schema ---------------------------------------------------------------------------


def test_every_document_under_k8s_is_a_kubernetes_object() -> None:
    for path in _yaml_files():
        if K8S in path.parents:
            for i, doc in enumerate(_docs(path)):
                assert _is_manifest(doc), f"{path.relative_to(DEPLOY)}#{i} has no apiVersion and kind"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_matches_its_schema(version: str) -> None:
    found = manifests()
    kinds = {d["kind"] for _, d in found}
    # Nothing passes by being skipped: the workloads and both custom resources are among what was checked.
    assert {"Deployment", "StatefulSet", "PodDisruptionBudget", "ScaledObject", "PrometheusRule"} <= kinds
    failures = []
    for where, doc in found:
        try:
            validate(doc, version)
        except jsonschema.ValidationError as e:
            at = ".".join(map(str, e.absolute_path))
            failures.append(f"{where} {doc['kind']} {doc.get('metadata', {}).get('name')}: {at}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            failures.append(f"{where}: {e.message} (a custom resource needs its schema in {SCHEMAS.name}/)")
    assert failures == []


def _gpu_statefulset() -> dict[str, Any]:
    return _find("StatefulSet", "gpu-worker")


def _bad_field(doc: dict[str, Any]) -> None:
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"


def _bad_type(doc: dict[str, Any]) -> None:
    doc["spec"]["replicas"] = "8"


def _bad_nested_type(doc: dict[str, Any]) -> None:
    doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9101"


def _so_bad_field(doc: dict[str, Any]) -> None:
    doc["spec"]["minReplicas"] = 1  # the HPA's spelling, not KEDA's


def _so_bad_type(doc: dict[str, Any]) -> None:
    doc["spec"]["maxReplicaCount"] = "16"


def _so_metadata_not_a_string(doc: dict[str, Any]) -> None:
    doc["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = False  # KEDA takes strings only


def _so_bad_behavior(doc: dict[str, Any]) -> None:  # inside the Kubernetes part (HPAScalingRules)
    doc["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["window"] = 60


def _rule_bad_field(doc: dict[str, Any]) -> None:
    doc["spec"]["groups"][0]["rules"][0]["expression"] = "up"


def _rule_bad_duration(doc: dict[str, Any]) -> None:
    doc["spec"]["groups"][0]["rules"][0]["for"] = "15 minutes"


@pytest.mark.parametrize(
    ("kind", "name", "spoil"),
    [
        ("StatefulSet", "gpu-worker", _bad_field),
        ("StatefulSet", "gpu-worker", _bad_type),
        ("Deployment", "compile-worker", _bad_nested_type),
        ("ScaledObject", "compile-worker", _so_bad_field),
        ("ScaledObject", "compile-worker", _so_bad_type),
        ("ScaledObject", "compile-worker", _so_metadata_not_a_string),
        ("ScaledObject", "compile-worker", _so_bad_behavior),
        ("PrometheusRule", "evalsvc-alerts", _rule_bad_field),
        ("PrometheusRule", "evalsvc-alerts", _rule_bad_duration),
    ],
)
def test_a_spoilt_copy_of_a_real_manifest_fails(kind: str, name: str, spoil: Any) -> None:
    """The negative cases: the same validation as above, on a copy of a real manifest with one thing wrong."""
    doc = json.loads(json.dumps(_find(kind, name)))
    validate(doc, KUBERNETES_VERSIONS[0])  # the copy is good as it is
    spoil(doc)
    for version in KUBERNETES_VERSIONS:
        with pytest.raises(jsonschema.ValidationError):
            validate(doc, version)


def test_a_kind_without_a_schema_fails() -> None:
    doc = json.loads(json.dumps(_find("ScaledObject", "compile-worker")))
    doc["kind"] = "ScaledJob"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate(doc, KUBERNETES_VERSIONS[0])


# -- the kustomization --------------------------------------------------------------------------------------


def test_kustomization_lists_every_k8s_file_and_only_existing_ones() -> None:
    (kustomization,) = _docs(DEPLOY / "kustomization.yaml")
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources)), "a resource listed twice"
    assert [r for r in resources if not (DEPLOY / r).is_file()] == []
    on_disk = {p.relative_to(DEPLOY).as_posix() for p in K8S.rglob("*") if p.is_file()}
    assert on_disk - set(resources) - EXCLUDED.keys() == set(), "in deploy/k8s, neither listed nor excluded"
    for path, why in EXCLUDED.items():
        assert (DEPLOY / path).is_file() and path not in resources and why.strip(), path
    generated = [*kustomization.get("configMapGenerator", []), *kustomization.get("secretGenerator", [])]
    sources = [entry.rpartition("=")[2] for gen in generated for entry in gen.get("files", [])]
    assert sources and [s for s in sources if not (DEPLOY / s).is_file()] == []


# -- compile workers: scaled by KEDA on the compile demand ---------------------------------------------------


def _prometheus_trigger() -> dict[str, Any]:
    (trigger,) = _find("ScaledObject", "compile-worker")["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    return trigger


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return container


def test_scaled_object_targets_the_compile_workers_within_sane_bounds() -> None:
    spec = _find("ScaledObject", "compile-worker")["spec"]
    target = _find(spec["scaleTargetRef"].get("kind", "Deployment"), spec["scaleTargetRef"]["name"])
    assert "replicas" not in target["spec"], "a replica count would reset the HPA's on every apply"
    assert _worker_command(target)[0] == "compile"
    # At least one replica: the compile workers are what export the demand it scales on.
    assert 1 <= spec["minReplicaCount"] <= spec["fallback"]["replicas"] <= spec["maxReplicaCount"]
    assert _prometheus_trigger()["metricType"] == "AverageValue"  # what KEDA's fallback requires
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] > 0  # the cooldown


def test_scaled_object_asks_the_deployed_prometheus_for_exported_metrics() -> None:
    meta = _prometheus_trigger()["metadata"]
    url = urlparse(meta["serverAddress"])
    service, namespace = (url.hostname or "").split(".")[:2]
    prometheus = _find("Service", service)
    assert namespace == prometheus["metadata"]["namespace"]
    assert url.port in [p["port"] for p in prometheus["spec"]["ports"]]
    names = metric_names(meta["query"])
    assert {"evalsvc_queue_depth", "evalsvc_inflight_jobs"} <= names <= exported_names()
    assert f'queue="{COMPILE_QUEUE}"' in meta["query"]
    # A replica is asked to carry more than its build slots (--concurrency): some wait, none idles.
    args = _container(_find("Deployment", "compile-worker"))["command"]
    assert float(meta["threshold"]) > int(args[args.index("--concurrency") + 1])


def _promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        msg = "promtool is not installed (apt-get install prometheus)"
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def test_scaled_object_query_is_waiting_plus_running_builds(tmp_path: Path) -> None:
    """Prometheus' own engine (promtool) runs the query: the waiting jobs counted once however many compile
    workers report them, plus each compile worker's running builds; GPU queues and workers do not count;
    no series gives no answer (KEDA's error, hence its fallback), not 0."""
    query = _prometheus_trigger()["metadata"]["query"]

    def series(name: str, labels: str, value: int) -> dict[str, str]:
        return {"series": f"{name}{{{labels}}}", "values": f"{value}x4"}

    demand = [
        series("evalsvc_queue_depth", f'queue="{COMPILE_QUEUE}", pod="compile-worker-a"', 10),
        series("evalsvc_queue_depth", f'queue="{COMPILE_QUEUE}", pod="compile-worker-b"', 10),
        series("evalsvc_queue_depth", 'queue="gpu.gpu-worker-0", pod="compile-worker-a"', 50),
        series("evalsvc_inflight_jobs", 'worker_kind="compile", worker="compile-worker-a"', 4),
        series("evalsvc_inflight_jobs", 'worker_kind="compile", worker="compile-worker-b"', 3),
        series("evalsvc_inflight_jobs", 'worker_kind="gpu", worker="gpu-worker-0"', 4),
    ]
    silent = [series("evalsvc_inflight_jobs", 'worker_kind="gpu", worker="gpu-worker-0"', 4)]
    cases = [(demand, [{"labels": "{}", "value": 10 + 4 + 3}]), (silent, [])]
    (tmp_path / "none.yml").write_text("groups: []\n")
    tests = {
        "rule_files": ["none.yml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": inputs,
                "promql_expr_test": [{"expr": query, "eval_time": "30s", "exp_samples": expected}],
            }
            for inputs, expected in cases
        ],
    }
    (tmp_path / "query.test.yml").write_text(yaml.safe_dump(tests))
    run = subprocess.run(
        [_promtool(), "test", "rules", "query.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


# -- GPU workers: one per GPU, a stable name --------------------------------------------------------------


def test_gpu_workers_take_one_gpu_each_on_gpu_nodes_under_a_stable_name() -> None:
    sts = _gpu_statefulset()
    pod = sts["spec"]["template"]["spec"]
    container = _container(sts)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"].get("requests", {}).get("nvidia.com/gpu", 1) == 1
    assert pod["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert any(t["key"] == "nvidia.com/gpu" and t["effect"] == "NoSchedule" for t in pod["tolerations"])
    # The worker's name is the pod's (gpu-worker-N, stable across restarts) and so is its queue.
    env = {e["name"]: e for e in container["env"]}
    assert env["EVALSVC_WORKER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    args = container["args"]
    assert args[args.index("--device") + 1] == "cuda:0"  # the one GPU the device plugin exposes
    assert args[args.index("--queue") + 1] == "gpu.$(EVALSVC_WORKER_NAME)"
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = _find("Service", sts["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"].items() <= labels.items()
    budget = _find("PodDisruptionBudget", "gpu-worker")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert 0 < budget["maxUnavailable"] <= sts["spec"]["replicas"]


def _worker_command(workload: dict[str, Any]) -> list[str]:
    """`evalsvc worker ...` as the container runs it (the GPU image's entrypoint is `evalsvc`)."""
    container = _container(workload)
    line = container.get("command", ["evalsvc"]) + container.get("args", [])
    assert line[:2] == ["evalsvc", "worker"], line
    return line[2:]


@pytest.mark.parametrize(("kind", "name"), [("Deployment", "compile-worker"), ("StatefulSet", "gpu-worker")])
def test_worker_command_is_one_the_cli_takes(kind: str, name: str) -> None:
    """Parsed by the real `evalsvc worker` command (parsing only: nothing starts); every $(VAR) it uses is
    set in the container, since Kubernetes would leave an unknown one as literal text."""
    import typer.main

    from evalsvc.cli import app

    workload = _find(kind, name)
    words = _worker_command(workload)
    command = typer.main.get_command(app)
    worker = command.commands["worker"]  # type: ignore[attr-defined]
    params = worker.make_context("worker", list(words)).params
    assert params["kind"] in ("compile", "gpu")
    defined = {e["name"] for e in _container(workload).get("env", [])}
    used = {w.split("$(", 1)[1].split(")", 1)[0] for w in words if "$(" in w}
    assert used <= defined


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("kind", "name"), [("Deployment", "compile-worker"), ("StatefulSet", "gpu-worker")])
def test_worker_probes_ask_what_the_worker_serves(kind: str, name: str) -> None:
    """The probes name the exporter's port, which is EVALSVC_METRICS_PORT and the scraped one; the real
    exporter of such a worker answers every probe's path, with Redis unreachable (a Redis outage must not
    restart the workers)."""
    workload = _find(kind, name)
    container = _container(workload)
    probes = [container[p] for p in PROBES if p in container]
    assert "livenessProbe" in container and probes
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = _find("ConfigMap", "evalsvc-config")["data"]
    notes = workload["spec"]["template"]["metadata"]["annotations"]
    for probe in probes:
        port = ports[probe["httpGet"]["port"]]
        assert port == int(config["EVALSVC_METRICS_PORT"]) == int(notes["prometheus.io/port"])

    worker_kind = _worker_command(workload)[0]
    settings = Settings(
        worker_kind=worker_kind,
        device="cuda:0" if worker_kind == "gpu" else "cpu",
        worker_name=f"{name}-0",
        metrics_host="127.0.0.1",
        metrics_port=0,
        redis_url=f"redis://127.0.0.1:{_closed_port()}/0",
    )
    metrics = WorkerMetrics(worker_kind, f"{name}-0")
    server = start_exporter(
        settings, exposition_registry(None, metrics.registry, worker_collectors(settings, COMPILE_QUEUE))
    )
    try:
        for path in {p["httpGet"]["path"] for p in probes}:
            answer = httpx.get(f"http://127.0.0.1:{server.server_port}{path}", timeout=60)
            assert answer.status_code == 200, path
            assert f'worker="{name}-0"' in answer.text and "evalsvc_worker_info" in answer.text
    finally:
        server.shutdown()
        server.server_close()
