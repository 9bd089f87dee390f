"""The alert rules: Prometheus' own checker and unit tests (promtool), every alert complete and tested
firing and not firing, naming only exported metrics, and loaded by every Prometheus we ship (compose,
Kubernetes, the Operator's PrometheusRule generated from the same file, `evalsvc up`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsvc.observability.prometheus_config import RULES_DIR, rule_files, scrape_config
from tests.observability.dashboards import exported_names, metric_names

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rules" / "evalsvc-alerts.yml"
UNIT_TESTS = sorted((RULES_DIR / "tests").glob("*.yml"))
GENERATOR = DEPLOY / "prometheus" / "build_prometheus_rule.py"
# Series that Prometheus makes (up) or redis_exporter exports, not the service.
EXTERNAL = {"up", "redis_up"}
SEVERITIES = {"critical", "warning", "info"}


def _promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        msg = "promtool is not installed (apt-get install prometheus)"
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def _promtool_run(*args: str) -> None:
    run = subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_prometheus_rule", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_promtool_checks_the_rules() -> None:
    _promtool_run("check", "rules", *map(str, sorted(RULES_DIR.glob("*.yml"))))


def test_promtool_unit_tests_pass() -> None:
    assert UNIT_TESTS
    _promtool_run("test", "rules", *map(str, UNIT_TESTS))


def test_every_alert_is_complete() -> None:
    alerts = _alerts()
    assert len(alerts) >= 14
    names = [a["alert"] for a in alerts]
    assert len(set(names)) == len(names)
    for a in alerts:
        assert a.get("for"), a["alert"]
        assert a["labels"]["severity"] in SEVERITIES, a["alert"]
        notes = a["annotations"]
        assert {"summary", "description", "runbook"} <= set(notes), a["alert"]
        assert notes["runbook"].startswith("docs/observability.md#alerts"), a["alert"]
    doc = (DEPLOY.parent / "docs" / "observability.md").read_text()
    assert "## Alerts" in doc
    assert [n for n in names if f"`{n}`" not in doc] == []


def test_every_alert_is_unit_tested_firing_and_silent() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names <= firing, names - firing
    assert names <= silent, names - silent


def test_every_alert_names_only_exported_metrics() -> None:
    known = exported_names() | EXTERNAL
    used = {a["alert"]: metric_names(a["expr"]) for a in _alerts()}
    assert all(used.values()), "an alert that reads no metric"
    unknown = {(alert, name) for alert, names in used.items() for name in names if name not in known}
    assert not unknown, unknown


def test_prometheus_rule_is_the_generators_output() -> None:
    committed = (DEPLOY / "k8s" / "prometheus-rules.yaml").read_text()
    assert committed == _generator().render(), "stale: run python deploy/prometheus/build_prometheus_rule.py"
    (doc,) = [d for d in yaml.safe_load_all(committed) if d is not None]
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    assert doc["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_every_prometheus_we_ship_loads_the_rules() -> None:
    # compose: rule_files relative to prometheus.yml, the rules directory mounted beside it
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["rules/*.yml"]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]
    assert "./prometheus/rules:/etc/prometheus/rules:ro" in compose["prometheus"]["volumes"]
    assert compose["redis-exporter"]["image"].startswith("oliver006/redis_exporter:")
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs["redis"]["static_configs"][0]["targets"] == ["redis-exporter:9121"]
    # Kubernetes: the PrometheusRule listed, and the bundled Prometheus mounting a ConfigMap of the same file
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert "k8s/prometheus-rules.yaml" in kustomization["resources"]
    (gen,) = [g for g in kustomization["configMapGenerator"] if g["name"] == "prometheus-rules"]
    assert gen["files"] == ["prometheus/rules/evalsvc-alerts.yml"]
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "prometheus.yaml").read_text()))
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (rules_glob,) = yaml.safe_load(cm["data"]["prometheus.yml"])["rule_files"]
    pod = sts["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v.get("configMap", {}).get("name") == "prometheus-rules"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert rules_glob == mount["mountPath"] + "/*.yml"
    # evalsvc up: absolute paths to the checkout's rule files
    assert rule_files() == [str(RULES)]


def test_promtool_accepts_the_local_stack_config(tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(scrape_config({"evalsvc-gateway": ["127.0.0.1:8000"]}, 1.0, rule_files()))
    assert yaml.safe_load(config.read_text())["rule_files"] == [str(RULES)]
    _promtool_run("check", "config", str(config))
