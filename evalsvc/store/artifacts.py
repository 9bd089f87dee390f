"""Artifact stores: a local directory, or Redis or an S3-compatible object store (s3_artifacts.py) so nodes
need no shared disk."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Protocol


class ArtifactStoreUnavailable(RuntimeError):
    """The artifact store cannot be reached or refuses this process (endpoint, bucket, credentials)."""


def check_key(key: str) -> str:
    """`key` if it is a plain artifact key (ASCII letters, digits, '_' and '-'), else ValueError."""
    if not (key.isascii() and key.replace("_", "").replace("-", "").isalnum()):
        raise ValueError(f"bad artifact key {key!r}")
    return key


class ArtifactStore(Protocol):
    """Immutable directories by key. `put` is atomic: a reader sees all of an artifact or none."""

    def has(self, key: str) -> bool: ...

    def put(self, key: str, src: Path) -> None: ...

    def fetch(self, key: str, dest: Path) -> bool: ...


class LocalArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def has(self, key: str) -> bool:
        return self._path(key).is_dir()

    def put(self, key: str, src: Path) -> None:
        final = self._path(key)
        if final.exists():
            return
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=self.root))
        shutil.copytree(src, tmp, dirs_exist_ok=True, symlinks=False)
        try:
            os.rename(tmp, final)
        except OSError:  # another writer won the race; its copy is identical
            shutil.rmtree(tmp, ignore_errors=True)

    def fetch(self, key: str, dest: Path) -> bool:
        src = self._path(key)
        if not src.is_dir():
            return False
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=False)
        return True


def pack_dir(src: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=3) as tar:
        tar.add(src, arcname=".")
    return buf.getvalue()


def unpack_dir(blob: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


class RedisArtifactStore:
    """Artifacts as gzipped tarballs in Redis keys; fine for .so files of a few MB."""

    def __init__(self, client, prefix: str = "evalsvc:artifact:", ttl_s: int = 7 * 86400) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s

    def has(self, key: str) -> bool:
        return bool(self.client.exists(self.prefix + key))

    def put(self, key: str, src: Path) -> None:
        self.client.set(self.prefix + key, pack_dir(src), ex=self.ttl_s, nx=True)

    def fetch(self, key: str, dest: Path) -> bool:
        blob = self.client.get(self.prefix + key)
        if blob is None:
            return False
        unpack_dir(blob, dest)
        return True
