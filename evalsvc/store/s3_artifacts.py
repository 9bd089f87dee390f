"""Artifacts in an S3-compatible object store (AWS S3, MinIO, SeaweedFS, Ceph RGW): what a fleet shares
past one machine, where megabytes per kernel would crowd Redis's memory.

Layout in the bucket:
    blobs/<sha256>   the packed directory (`pack_dir`), named by the SHA-256 of its bytes
    keys/<key>       {"sha256": ..., "size": ...}: which blob holds the artifact `key`; written after the blob

A read checks the blob against its name before unpacking it; a blob that does not match (or a pointer to a
missing one) is refused, logged and forgotten, so the next compile stores the artifact afresh. One PUT is
atomic in S3, and the pointer only names a blob already stored whole, so a reader sees all of an artifact or
none. Objects older than the retention are removed by `prune` (docs/design.md, "Artifact stores")."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from evalsvc.store.artifacts import ArtifactStoreUnavailable, check_key, pack_dir, unpack_dir

log = logging.getLogger(__name__)

BLOBS = "blobs/"
KEYS = "keys/"
POINTER_MAX_BYTES = 1024
# A blob is written just before its pointer: this much older than the retention, so pruning never takes
# the blob of a pointer it keeps, however slowly that put went.
BLOB_GRACE = timedelta(hours=1)
_DIGEST = re.compile(r"[0-9a-f]{64}")
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
# Another writer's conditional PUT of the same pointer came first (412), or was in flight (409).
_LOST_RACE = frozenset({"412", "PreconditionFailed", "409", "ConditionalRequestConflict"})
_REFUSED = frozenset({"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"})


class ArtifactTooLarge(RuntimeError):
    """An artifact over the store's size limit: refused on put and on fetch."""


@dataclass(frozen=True)
class PruneReport:
    cutoff: datetime
    removed_keys: int
    removed_blobs: int
    kept: int


def s3_client(
    endpoint_url: str | None,
    region: str,
    access_key_id: str | None,
    secret_access_key: str | None,
    timeout_s: float,
    attempts: int = 3,
) -> Any:
    """A boto3 S3 client that gives up within seconds: connect and read timeouts of `timeout_s`, `attempts`
    tries with backoff between them (botocore's standard retry mode).

    No keys: boto3's own chain (its environment variables, ~/.aws, an instance or pod role)."""
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"mode": "standard", "max_attempts": attempts},
        # a custom endpoint (MinIO, SeaweedFS, a test server on 127.0.0.1) has no bucket subdomains
        s3={"addressing_style": "path" if endpoint_url else "auto"},
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        config=config,
    )


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


class S3ArtifactStore:
    """The `ArtifactStore` of a fleet: content-addressed blobs in one bucket, checked on every read."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        *,
        retention_days: float = 7.0,
        max_object_bytes: int = 256 * 1024**2,
        blob_grace: timedelta = BLOB_GRACE,
    ) -> None:
        if retention_days <= 0 or max_object_bytes < 1:
            raise ValueError("retention_days and max_object_bytes must be positive")
        self.client = client
        self.bucket = bucket
        self.retention = timedelta(days=retention_days)
        self.max_object_bytes = max_object_bytes
        self.blob_grace = blob_grace

    @property
    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.client.meta.endpoint_url}"

    @contextmanager
    def _speaking(self, doing: str) -> Iterator[None]:
        """Transport failures and refusals as ArtifactStoreUnavailable, saying what and where."""
        try:
            yield
        except ClientError as e:
            code = _code(e)
            if code == "NoSuchBucket":
                raise ArtifactStoreUnavailable(f"{doing}: {self.where} does not exist") from e
            if code in _REFUSED:
                why = f"{self.where} refused the credentials ({code}); check the S3 keys in the secrets"
                raise ArtifactStoreUnavailable(f"{doing}: {why}") from e
            raise ArtifactStoreUnavailable(f"{doing}: {self.where} answered {code}: {e}") from e
        except BotoCoreError as e:  # connection refused, timeouts, DNS
            raise ArtifactStoreUnavailable(f"{doing}: could not reach {self.where}: {e}") from e

    def check(self) -> None:
        """ArtifactStoreUnavailable unless the bucket exists and these credentials may use it."""
        with self._speaking("checking the artifact store"):
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except ClientError as e:
                if _code(e) in _MISSING:  # HEAD answers a bare 404, no NoSuchBucket
                    raise ArtifactStoreUnavailable(
                        f"{self.where} does not exist: create it, or set EVALSVC_S3_BUCKET"
                    ) from e
                raise

    # -- the ArtifactStore protocol ------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        with self._speaking(f"looking up artifact {key}"):
            try:
                self.client.head_object(Bucket=self.bucket, Key=KEYS + check_key(key))
            except ClientError as e:
                if _code(e) in _MISSING:
                    return False
                raise
        return True

    def put(self, key: str, src: Path) -> None:
        if self.has(key):
            return
        blob = pack_dir(src)
        if len(blob) > self.max_object_bytes:
            raise ArtifactTooLarge(
                f"artifact {key} packs to {len(blob)} bytes, over the store's limit of "
                f"{self.max_object_bytes} (EVALSVC_S3_MAX_OBJECT_BYTES)"
            )
        digest = hashlib.sha256(blob).hexdigest()
        pointer = json.dumps({"sha256": digest, "size": len(blob)}).encode()
        with self._speaking(f"storing artifact {key}"):
            # always written, even when present: a fresh age keeps it from pruning while this key is new
            self.client.put_object(Bucket=self.bucket, Key=BLOBS + digest, Body=blob)
            try:
                self.client.put_object(
                    Bucket=self.bucket,
                    Key=KEYS + key,
                    Body=pointer,
                    ContentType="application/json",
                    IfNoneMatch="*",
                )
            except ClientError as e:
                if _code(e) not in _LOST_RACE:
                    raise
                # the first writer's artifact of this key stands: built from the same inputs, as good

    def fetch(self, key: str, dest: Path) -> bool:
        """Unpack artifact `key` into `dest` if it is stored and intact; False if it is not (a blob that
        does not match its digest is refused and forgotten). ArtifactTooLarge over the size limit."""
        named = self._pointer(key)
        if named is None:
            return False
        digest, size = named
        blob = self._get(BLOBS + digest, f"artifact {key}", missing_ok=True)
        if blob is None:
            log.warning("artifact %s names blob %s, which is gone (pruned?); forgetting the key", key, digest)
            self._forget(key, None)
            return False
        actual = hashlib.sha256(blob).hexdigest()
        if len(blob) != size or actual != digest:
            log.error(
                "artifact %s failed its integrity check: blob %s holds %d bytes hashing to %s, where its key "
                "says %d bytes hashing to the blob's name; refused, and forgotten so that it is built again",
                key,
                digest,
                len(blob),
                actual,
                size,
            )
            self._forget(key, digest)
            return False
        unpack_dir(blob, dest)
        return True

    # -- retention -----------------------------------------------------------------------------------------
    def prune(self, now: datetime | None = None) -> PruneReport:
        """Remove every key and blob stored longer ago than the retention (blobs `blob_grace` later still, so
        a kept key never loses its blob); `now` is for operators and tests that look at another day."""
        cutoff = (now or datetime.now(UTC)) - self.retention
        removed_keys, kept_keys = self._remove_older(KEYS, cutoff)
        removed_blobs, kept_blobs = self._remove_older(BLOBS, cutoff - self.blob_grace)
        return PruneReport(cutoff, removed_keys, removed_blobs, kept_keys + kept_blobs)

    def _remove_older(self, prefix: str, cutoff: datetime) -> tuple[int, int]:
        removed = kept = 0
        with self._speaking(f"pruning {prefix}"):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                listed = page.get("Contents", [])
                old = [{"Key": o["Key"]} for o in listed if o["LastModified"] < cutoff]
                kept += len(listed) - len(old)
                if old:  # one page is at most 1,000 keys, DeleteObjects' own limit
                    delete = {"Objects": old, "Quiet": True}
                    answer = self.client.delete_objects(Bucket=self.bucket, Delete=delete)
                    if errors := answer.get("Errors"):
                        raise ArtifactStoreUnavailable(f"pruning {prefix}: {self.where} kept {errors[:3]}")
                    removed += len(old)
        return removed, kept

    # -- reading, bounded ----------------------------------------------------------------------------------
    def _pointer(self, key: str) -> tuple[str, int] | None:
        """The digest and size that key `key` names; None if there is no such key or it is unreadable."""
        name = KEYS + check_key(key)
        try:
            raw = self._get(name, f"artifact {key}'s key", missing_ok=True, limit=POINTER_MAX_BYTES)
            if raw is None:
                return None
            doc = json.loads(raw)
            digest, size = doc["sha256"], doc["size"]
            if not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
                raise ValueError(f"sha256 {digest!r}")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(f"size {size!r}")
        except (ArtifactTooLarge, ValueError, KeyError, TypeError) as e:
            log.error("artifact %s's key object is unreadable (%s); refused, and forgotten", key, e)
            self._forget(key, None)
            return None
        if size > self.max_object_bytes:
            raise ArtifactTooLarge(
                f"artifact {key} is {size} bytes, over the store's limit of {self.max_object_bytes}"
            )
        return digest, size

    def _get(self, name: str, what: str, *, missing_ok: bool, limit: int | None = None) -> bytes | None:
        limit = self.max_object_bytes if limit is None else limit
        with self._speaking(f"reading {what}"):
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=name)
            except ClientError as e:
                if missing_ok and _code(e) in _MISSING:
                    return None
                raise
            body = answer["Body"]
            try:
                if answer.get("ContentLength", 0) > limit:
                    raise ArtifactTooLarge(
                        f"{what} is {answer['ContentLength']} bytes, over the limit {limit}"
                    )
                data: bytes = body.read(limit + 1)  # a server that lied about the length stops here too
            finally:
                body.close()
        if len(data) > limit:
            raise ArtifactTooLarge(f"{what} is over the limit of {limit} bytes")
        return data

    def _forget(self, key: str, blob_digest: str | None) -> None:
        """Drop key `key` (and its bad blob): the next compile of it stores it afresh."""
        with self._speaking(f"forgetting artifact {key}"):
            self.client.delete_object(Bucket=self.bucket, Key=KEYS + key)
            if blob_digest is not None:
                self.client.delete_object(Bucket=self.bucket, Key=BLOBS + blob_digest)
