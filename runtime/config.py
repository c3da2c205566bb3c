"""Typed access to the runtime's settings (settings.STEWARD, read from the environment
by console/settings.py). The runtime reads only django.conf.settings, never console."""

from __future__ import annotations

import hashlib

from django.conf import settings


def _get(name):
    return settings.STEWARD[name]


def lease_seconds() -> float:
    return float(_get("LEASE_SECONDS"))


def heartbeat_seconds() -> float:
    configured = float(_get("HEARTBEAT_SECONDS"))
    return configured if configured > 0 else lease_seconds() / 3


def worker_attempts() -> int:
    return int(_get("WORKER_ATTEMPTS"))


def sweep_seconds() -> float:
    return float(_get("SWEEP_SECONDS"))


def stop_bound_seconds() -> float:
    return float(_get("STOP_BOUND_SECONDS"))


def stop_grace_seconds() -> float:
    return float(_get("STOP_GRACE_SECONDS"))


def approval_separation_of_duties() -> bool:
    return bool(_get("APPROVAL_SEPARATION_OF_DUTIES"))


def approval_max_seconds() -> float:
    return float(_get("APPROVAL_MAX_SECONDS"))


def redispatch_seconds() -> float:
    return float(_get("REDISPATCH_SECONDS"))


def max_crashes() -> int:
    return int(_get("MAX_CRASHES"))


def max_input_bytes() -> int:
    return int(_get("MAX_INPUT_BYTES"))


def max_output_bytes() -> int:
    return int(_get("MAX_OUTPUT_BYTES"))


def agent_modules() -> list[str]:
    return list(_get("AGENT_MODULES"))


def default_pool() -> dict:
    return dict(_get("DEFAULT_POOL"))


def pool_max_running() -> int:
    return int(_get("POOL_MAX_RUNNING"))


def pool_max_queued() -> int:
    return int(_get("POOL_MAX_QUEUED"))


def breaker_limits() -> dict[str, int]:
    """The fleet's breaker limits (runtime/limits/breakers.py), below an agent's own and
    an operator's override of one task's."""
    return dict(_get("BREAKERS"))


def audit_seal_seconds() -> float:
    return float(_get("AUDIT_SEAL_SECONDS"))


def audit_seal_keys() -> list[tuple[str, bytes]]:
    """(key id, key) for sealing (the first) and for checking older seals (all)."""
    return [(hashlib.sha256(key).hexdigest()[:12], key) for key in _get("AUDIT_SEAL_KEYS")]


def queue_name() -> str:
    return settings.CELERY_TASK_DEFAULT_QUEUE


def database_roles() -> dict[str, str]:
    """Profile name -> the role `manage.py migrate` grants it to (runtime/roles.py)."""
    return dict(_get("DB_ROLES"))


def migrate_database() -> str:
    """The connection alias `manage.py migrate` uses by default: the owner's, when
    STEWARD_MIGRATE_DATABASE_URL names one, else the application's."""
    return _get("MIGRATE_DATABASE")


def capability_key() -> bytes | None:
    """The PEM of the Ed25519 key that signs capability tokens, or None (not configured)."""
    return _get("CAPABILITY_KEY")


def process_role() -> str:
    """ "web" or "worker" (STEWARD_PROCESS): a worker holds no signing key."""
    return _get("PROCESS")


def worker_credential() -> str | None:
    """This worker's credential for the minting service (`swc.<id>.<secret>`), or None."""
    return _get("WORKER_CREDENTIAL")


def gateway_url() -> str:
    """The credential gateway's base URL, as a worker reaches it."""
    return _get("GATEWAY_URL")


def gateway_durable_admit() -> bool:
    """Whether an admitted gateway call's decision and row wait for the WAL flush
    before the call is forwarded (docs/adr/0014-credential-gateway.md)."""
    return bool(_get("GATEWAY_DURABLE_ADMIT"))


def gateway_timeout_seconds() -> float:
    """How long the gateway carries one call at most: an admitted call older than this
    is no longer in flight (settings.GATEWAY, the web side's)."""
    return float(getattr(settings, "GATEWAY", {}).get("TIMEOUT_SECONDS", 120.0))


def webhook_key() -> bytes:
    """The Fernet key that encrypts webhook secrets at rest: derived from SECRET_KEY, so
    a database dump alone does not yield them."""
    import base64

    material = hashlib.sha256(b"steward-webhook-secrets:" + settings.SECRET_KEY.encode()).digest()
    return base64.urlsafe_b64encode(material)
