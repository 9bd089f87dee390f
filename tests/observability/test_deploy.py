"""Deployment files: they parse, Kubernetes documents are complete, configuration is only the settings'
environment variables, and Prometheus' own checker accepts the scrape configurations."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evalsvc.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _known_env() -> set[str]:
    names = {"EVALSVC_" + name.upper() for name in Settings.model_fields}
    aliases = {
        f.validation_alias for f in Settings.model_fields.values() if isinstance(f.validation_alias, str)
    }
    return names | aliases


def test_every_yaml_file_parses() -> None:
    files = sorted(DEPLOY.rglob("*.yml")) + sorted(DEPLOY.rglob("*.yaml"))
    assert len(files) >= 10
    for f in files:
        assert _docs(f), f


def test_kubernetes_documents_are_complete() -> None:
    kinds = set()
    for f in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in _docs(f):
            assert doc.get("apiVersion") and doc.get("kind"), f
            assert doc.get("metadata", {}).get("name"), (f, doc.get("kind"))
            kinds.add(doc["kind"])
    assert {"Deployment", "Service", "StatefulSet", "ScaledObject", "ConfigMap", "PrometheusRule"} <= kinds
    # What the kustomization lists, and every manifest's schema: tests/scale/test_manifests.py.


def test_gpu_workers_get_one_gpu_each() -> None:
    (gpu,) = [d for d in _docs(DEPLOY / "k8s" / "gpu-worker.yaml") if d["kind"] == "StatefulSet"]
    pod = gpu["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1 and pod["nodeSelector"]
    compose = _docs(DEPLOY / "docker-compose.yml")[0]["services"]
    gpu_services = {n: s for n, s in compose.items() if n.startswith("gpu-worker")}
    ids = [
        s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for s in gpu_services.values()
    ]
    assert len(gpu_services) >= 2 and all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == len(ids)
    assert "--appendonly" in compose["redis"]["command"]


def test_no_two_workers_share_a_disk() -> None:
    """Workers share only Redis (tests/scale/test_roles_apart.py): a named volume mounted by two services,
    or by a service of several replicas, would be a disk they share."""
    compose = _docs(DEPLOY / "docker-compose.yml")[0]
    named = set(compose["volumes"])
    mounts: dict[str, list[str]] = {}
    for name, service in compose["services"].items():
        replicas = service.get("deploy", {}).get("replicas", 1)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source in named:
                mounts.setdefault(source, []).extend([name] * replicas)
    shared = {v: users for v, users in mounts.items() if len(users) > 1}
    assert not shared, shared
    workers = [n for n in compose["services"] if "worker" in n]
    assert len(workers) >= 3 and all(
        any("/var/lib/evalsvc" in str(v) for v in compose["services"][n]["volumes"]) for n in workers
    )


def test_redis_is_scraped_through_its_exporter() -> None:
    compose = _docs(DEPLOY / "docker-compose.yml")[0]["services"]
    assert compose["redis-exporter"]["environment"]["REDIS_ADDR"] == "redis://redis:6379"
    (sts,) = [d for d in _docs(DEPLOY / "k8s" / "redis.yaml") if d["kind"] == "StatefulSet"]
    template = sts["spec"]["template"]
    (exporter,) = [c for c in template["spec"]["containers"] if c["name"] == "redis-exporter"]
    port = str(exporter["ports"][0]["containerPort"])
    notes = template["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/port"] == port


def test_configuration_is_only_settings_variables() -> None:
    known = _known_env()
    pattern = re.compile(r"\b((?:EVALSVC|PROMETHEUS)_[A-Z0-9_]+)\b")
    used = set()
    for f in [DEPLOY / "docker-compose.yml", *sorted((DEPLOY / "k8s").glob("*.yaml"))]:
        used |= set(pattern.findall(f.read_text()))
    used -= {"EVALSVC_TAG"}  # the image tag compose substitutes, not a setting
    assert used, "no configuration found"
    assert used <= known, used - known


def test_promtool_accepts_the_compose_scrape_config() -> None:
    """(Debian's promtool is built without Kubernetes discovery, so the k8s one is checked by shape.)"""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail("promtool is not installed (apt-get install prometheus)")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    path = DEPLOY / "prometheus" / "prometheus.yml"
    run = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    (cm,) = [d for d in _docs(DEPLOY / "k8s" / "prometheus.yaml") if d["kind"] == "ConfigMap"]
    (job,) = yaml.safe_load(cm["data"]["prometheus.yml"])["scrape_configs"]
    assert job["kubernetes_sd_configs"][0]["role"] == "pod"
    assert yaml.safe_load(cm["data"]["prometheus.yml"])["rule_files"]
    keep = job["relabel_configs"][0]
    assert keep["action"] == "keep" and "prometheus_io_scrape" in keep["source_labels"][0]
