"""API keys to tenants. Keys are compared as SHA-256 digests in constant time, against every key."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from dataclasses import dataclass

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant (for quotas, ownership, idempotency) and a non-secret key id.

    `operator` is the caller when authentication is off: what it registers (tasks, suites) is the
    operator's shared content, readable by every tenant and written by none, like what the CLI imports.
    """

    tenant: str
    key_id: str
    operator: bool = False

    @property
    def owner(self) -> str | None:
        """The namespace the caller's tasks and suites live in: its tenant, or None (the shared one)."""
        return None if self.operator else self.tenant


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class Authenticator:
    """Holds only digests of the configured keys, so equal-length comparisons leak nothing."""

    def __init__(self, api_keys: Mapping[str, str]) -> None:
        self._keys = [(_digest(k), tenant) for k, tenant in api_keys.items()]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def authenticate(self, presented: str | None, client: str) -> Principal | None:
        """The caller's principal, or None when the key is missing or unknown."""
        if not self.enabled:
            return Principal(ANONYMOUS, "anon:" + client, operator=True)
        if not presented:
            return None
        digest = _digest(presented)
        tenant: str | None = None
        for known, owner in self._keys:  # no early exit: the time spent does not depend on which key
            if hmac.compare_digest(digest, known):
                tenant = owner
        return Principal(tenant, "key:" + digest.hex()[:16]) if tenant is not None else None


def may_author_tasks(principal: Principal, authors: Collection[str] | None) -> bool:
    """Whether the caller may hand the service task code (register a task, send one inline): the
    operator always, tenants when `task_authors` is unset or names them."""
    return principal.operator or authors is None or principal.tenant in authors
