"""Leases: a service's job lives while its owner renews it, as an etcd lease or torchft's heartbeats.

Pure bookkeeping with the time passed in (the service passes its clock, a test its own numbers).
The secret is kept only as its sha256, in memory and in the state file: a copy of the state
cannot renew or delete anybody's job.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass


class NoLease(KeyError):
    """No job of that name holds a lease."""


class WrongSecret(PermissionError):
    """The secret is not the one the job was created with."""


def new_secret() -> tuple[str, str]:
    """A job's secret, and the hash the service keeps of it.  Hex, so that it never starts with "-",
    which `ina-ctl job delete --secret SECRET` would take for an option (base64url did, now and then)."""
    secret = secrets.token_hex(24)
    return secret, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Lease:
    seconds: float  # time to live after each renewal
    secret_hash: str
    expires: float  # on the service's clock


class Leases:
    """Every job's lease; thread-safe, and never held while a switch is written, so renewals stay quick."""

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()

    def hold(self, name: str, seconds: float, secret_hash: str, now: float, grace: float = 0.0) -> None:
        """Start (or, after a restart of the service, resume) a lease; ``grace``: extra time before its
        first renewal is due, for owners that were cut off while the service was away."""
        with self._lock:
            self._leases[name] = Lease(seconds, secret_hash, now + max(seconds, grace))

    def check(self, name: str, secret: str) -> Lease:
        with self._lock:
            lease = self._leases.get(name)
        if lease is None:
            raise NoLease(name)
        if not hmac.compare_digest(lease.secret_hash, hash_secret(secret)):
            raise WrongSecret(f"wrong secret for job {name}")
        return lease

    def renew(self, name: str, secret: str, now: float) -> float:
        """The seconds the job now lives unrenewed."""
        lease = self.check(name, secret)
        with self._lock:
            lease.expires = now + lease.seconds
        return lease.seconds

    def remaining(self, name: str, now: float) -> float | None:
        with self._lock:
            lease = self._leases.get(name)
        return None if lease is None else max(0.0, lease.expires - now)

    def expired(self, now: float) -> list[tuple[str, Lease]]:
        with self._lock:
            return [(n, lease) for n, lease in self._leases.items() if lease.expires <= now]

    def release(self, name: str) -> None:
        with self._lock:
            self._leases.pop(name, None)
