"""EVALSVC_REDIS_URL's two forms: a single Redis, or a primary found through Sentinel
(`sentinel://host:port,host:port/<master>/<db>`). Malformed values are refused when the settings load, with a
message that names the problem and never the password; Kombu gets the same deployment in its own spelling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from kombu.utils.url import url_to_parts
from pydantic import ValidationError

from evalsvc.queues import make_celery
from evalsvc.redis_clients import celery_broker
from evalsvc.settings import RedisSentinel, Settings


def test_a_sentinel_url_names_the_sentinels_the_master_and_the_database() -> None:
    url = "sentinel://:s%40cret@redis-0.sentinel:26379,redis-1.sentinel,[::1]:26380/evalsvc/2"
    assert Settings(redis_url=url).redis_sentinel == RedisSentinel(
        sentinels=(("redis-0.sentinel", 26379), ("redis-1.sentinel", 26379), ("::1", 26380)),
        master="evalsvc",
        db=2,
        password="s@cret",
    )
    assert Settings(redis_url="sentinel://h/m").redis_sentinel == RedisSentinel((("h", 26379),), "m")
    assert Settings(redis_url="redis://127.0.0.1:6379/0").redis_sentinel is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("sentinal://h:26379/evalsvc", "scheme 'sentinal' is none of"),
        ("sentinel://h:26379", "names its master after the hosts"),
        ("sentinel://h:26379/", "names its master after the hosts"),
        ("sentinel://h:26379/evalsvc/0/1", "names its master after the hosts"),
        ("sentinel://h:26379/ev@l svc", "master name"),
        ("sentinel://h:26379/evalsvc/zero", "database 'zero' is not a number"),
        ("sentinel://h1,,h2/evalsvc", "empty sentinel address"),
        ("sentinel:///evalsvc", "empty sentinel address"),
        ("sentinel://h:99999/evalsvc", "sentinel address 'h:99999'"),
        ("sentinel://h:port/evalsvc", "sentinel address 'h:port'"),
        ("sentinel://h:0/evalsvc", "is not host[:port]"),
        ("sentinel://h/evalsvc?master=x", "takes no query"),
    ],
)
def test_a_malformed_redis_url_is_refused_at_load(url: str, problem: str) -> None:
    with pytest.raises(ValidationError, match="redis_url") as refused:
        Settings(redis_url=url)
    assert problem in str(refused.value)


def test_the_refusal_does_not_repeat_the_password() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(redis_url="sentinel://:hunter2@h1,,h2/evalsvc")
    assert "hunter2" not in str(refused.value)


def test_kombu_gets_every_sentinel_the_master_name_and_the_login() -> None:
    url = "sentinel://:p%40ss@a:1,[::1]:2/evalsvc/3"
    broker, options = celery_broker(Settings(redis_url=url))
    assert broker == "sentinel://:p%40ss@a:1/3;sentinel://[::1]:2/3"
    assert options == {"master_name": "evalsvc"}
    app = make_celery(Settings(redis_url=url, redelivery_after_s=60))
    assert app.conf.broker_transport_options == {
        "visibility_timeout": 60,
        "unacked_restore_interval": 6,
        "unacked_restore_throttle": 1,
        "master_name": "evalsvc",
    }
    with app.connection_for_write() as conn:  # Kombu reads it back as its Sentinel transport, not a Redis
        assert conn.transport_cls == "sentinel" and conn.password == "p@ss" and conn.virtual_host == "3"
        assert [url_to_parts(alt)[1:3] for alt in conn.alt] == [("a", 1), ("::1", 2)]


def test_a_single_redis_is_kombus_redis_transport() -> None:
    assert celery_broker(Settings(redis_url="redis://r:6379/1")) == ("redis://r:6379/1", {})


def test_the_deployments_sentinel_urls_name_their_sentinels_and_master() -> None:
    """Kubernetes: the configured URL names every pod of the sentinels' StatefulSet and the master name
    their start script monitors; compose: the URL its comment gives names its three sentinel services."""
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    (config,) = yaml.safe_load_all((deploy / "k8s" / "config.yaml").read_text())
    target = Settings(redis_url=config["data"]["EVALSVC_REDIS_URL"]).redis_sentinel
    docs = [d for d in yaml.safe_load_all((deploy / "k8s" / "redis-sentinel.yaml").read_text()) if d]
    (sentinels,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (container,) = sentinels["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert target is not None and target.master == env["MASTER_NAME"]
    service, port = sentinels["spec"]["serviceName"], container["ports"][0]["containerPort"]
    pods = [
        f"redis-sentinel-{i}.{service}.evalsvc.svc.cluster.local"
        for i in range(sentinels["spec"]["replicas"])
    ]
    assert target.sentinels == tuple((pod, port) for pod in pods)

    compose_text = (deploy / "docker-compose.yml").read_text()
    (url,) = re.findall(r"EVALSVC_REDIS_URL=(sentinel://\S+)", compose_text)
    target = Settings(redis_url=url).redis_sentinel
    services = yaml.safe_load(compose_text)["services"]
    assert target is not None and all(host in services for host, _ in target.sentinels)
    assert f"sentinel monitor {target.master} redis 6379 2" in services["sentinel-1"]["command"][2]
