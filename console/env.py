"""Reading configuration from the environment, failing loudly on malformed values.

Settings must never guess: a typo in STEWARD_LEASE_SECONDS should stop the process at
start-up, not silently run with a default that changes how recovery behaves.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
# `make run` / `make test` start embedded PostgreSQL and Redis when DATABASE_URL and
# REDIS_URL are unset, and write their addresses here so that a second terminal
# (`manage.py steward tasks`) finds the same services.
SERVICES_ENV_FILE = BASE_DIR / ".steward" / "services.env"


def _services_file() -> dict[str, str]:
    if not SERVICES_ENV_FILE.exists():
        return {}
    values = {}
    for line in SERVICES_ENV_FILE.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and not name.startswith("#"):
            values[name.strip()] = value.strip()
    return values


def get(name: str, default: str | None = None) -> str | None:
    if name in os.environ:
        return os.environ[name]
    if name in ("DATABASE_URL", "REDIS_URL"):
        return _services_file().get(name, default)
    return default


def get_bool(name: str, default: bool) -> bool:
    raw = get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def get_number(name: str, default: float, *, minimum: float = 0, maximum: float | None = None, integer: bool = False):
    raw = get(name)
    if raw is None:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at most {maximum}")
    return value


def database_from_url(url: str) -> dict:
    """Turn postgres://user:pass@host:port/name?host=/socket/dir into Django's dict.

    The `host` query parameter is how pgserver (the embedded default) names its unix
    socket directory, so it wins over the network location when both are present.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, got {parsed.scheme!r}")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    name = unquote(parsed.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL names no database")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parsed.username or "") or "postgres",
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": query.pop("host", None) or parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        "OPTIONS": query,
    }


def http_url(name: str, default: str | None) -> str | None:
    """An http(s) URL with a host, without its trailing slash."""
    raw = get(name)
    if raw is None or raw == "":
        return default
    parsed = urlparse(raw)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ImproperlyConfigured(f"{name} must be an http:// or https:// URL with a host, got {raw[:80]!r}")
    return raw.rstrip("/")


TOOL_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def gateway_tools(name: str) -> dict[str, dict]:
    """STEWARD_TOOLS: a JSON object of tool name -> {"url", "key", "header"?}. Names are
    lowercase identifiers (they are path segments); a header other than Authorization
    carries the key as it is, Authorization carries `Bearer <key>`. Anything else stops
    start-up naming the tool and the field (never echoing a key)."""
    raw = get(name)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} is not JSON") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of tool name -> settings")
    tools = {}
    for tool, spec in value.items():
        if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
            raise ImproperlyConfigured(f"{name}: tool names are lowercase identifiers, not {str(tool)[:40]!r}")
        if not isinstance(spec, dict) or set(spec) - {"url", "key", "header"}:
            raise ImproperlyConfigured(f"{name}: tool {tool!r} takes url, key and header only")
        url, key, header = spec.get("url"), spec.get("key"), spec.get("header", "Authorization")
        parsed = urlparse(url) if isinstance(url, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ImproperlyConfigured(f"{name}: tool {tool!r} needs an http(s) url")
        if not isinstance(key, str) or not key or not key.isprintable():
            raise ImproperlyConfigured(f"{name}: tool {tool!r} needs a key (a non-empty string)")
        if not isinstance(header, str) or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", header):
            raise ImproperlyConfigured(f"{name}: tool {tool!r} has a malformed header name")
        tools[tool] = {"url": url.rstrip("/"), "key": key, "header": header}
    return tools


def audit_seal_keys(secret_key: str) -> list[bytes]:
    """STEWARD_AUDIT_SEAL_KEY, then each of STEWARD_AUDIT_SEAL_OLD_KEYS (comma-separated);
    without the first, one derived from the secret key. A key shorter than 32 bytes is
    refused: it would be the weak point of every seal."""
    given = get("STEWARD_AUDIT_SEAL_KEY")
    keys = [given] if given else [hmac.new(secret_key.encode(), b"steward audit seal", hashlib.sha256).hexdigest()]
    keys += [k.strip() for k in (get("STEWARD_AUDIT_SEAL_OLD_KEYS") or "").split(",") if k.strip()]
    for key in keys:
        if len(key.encode()) < 32:
            raise ImproperlyConfigured("STEWARD_AUDIT_SEAL_KEY (and each old key) must be at least 32 bytes")
    return [key.encode() for key in keys]


def capability_key(secret_key: str, debug: bool) -> bytes | None:
    """STEWARD_CAPABILITY_KEY: the Ed25519 private key (PEM; `\\n` may stand for newlines
    in a one-line variable) that signs capability tokens (runtime/authz/tokens.py). A
    value that is not an Ed25519 private key stops start-up.

    Unset in debug: a key derived from the secret key (its seed is HMAC-SHA256(secret
    key, "steward capability key"), so every process of one deployment, web and workers,
    derives the same key and a restart keeps tokens valid). Unset otherwise: None, and
    minting a token refuses; nothing mints one until the gateway is configured."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    given = get("STEWARD_CAPABILITY_KEY")
    if given:
        pem = given.replace("\\n", "\n").encode()
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(
                f"STEWARD_CAPABILITY_KEY is not an unencrypted PEM private key ({exc})"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ImproperlyConfigured("STEWARD_CAPABILITY_KEY must be an Ed25519 private key")
        return pem
    if not debug:
        return None
    seed = hmac.new(secret_key.encode(), b"steward capability key", hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def connection_bounds(lease_seconds: float) -> dict:
    """libpq connection options that bound what a stale owner can hold.

    A worker cut off from PostgreSQL mid-transaction (a partition, a frozen VM) leaves
    a backend holding row locks that recovery skips (SKIP LOCKED). The server ends such
    a session once it has been idle in its transaction for a third of the lease, and
    cancels any statement running longer than that, so everything a stale owner holds
    is gone before its lease lapses and the supervisor takes over within the lease plus
    one sweep (docs/adr/0012-bounded-stale-owners.md). TCP keepalives on both ends
    find a vanished peer; tcp_user_timeout ends a connection whose sent data goes
    unacknowledged for a lease. The application name lets an operator (and the fault
    tests) find a process's backends in pg_stat_activity.
    """
    third = lease_seconds / 3
    idle_ms = get_number("STEWARD_DB_IDLE_IN_TRANSACTION_TIMEOUT", third, minimum=0) * 1000
    statement_ms = get_number("STEWARD_DB_STATEMENT_TIMEOUT", third, minimum=0) * 1000
    keepalive = max(1, int(third))
    server = {
        "idle_in_transaction_session_timeout": int(idle_ms),
        "statement_timeout": int(statement_ms),
        "tcp_keepalives_idle": keepalive,
        "tcp_keepalives_interval": max(1, keepalive // 3),
        "tcp_keepalives_count": 3,
    }
    options = " ".join(f"-c {name}={value}" for name, value in server.items())
    return {
        "options": options,
        "keepalives": 1,
        "keepalives_idle": keepalive,
        "keepalives_interval": max(1, keepalive // 3),
        "keepalives_count": 3,
        "tcp_user_timeout": int(lease_seconds * 1000),
        "application_name": f"steward:{os.getpid()}",
    }


HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")


def client_address_header() -> tuple[str, int]:
    """STEWARD_CLIENT_IP_HEADER and STEWARD_CLIENT_IP_PROXIES: where a sign-in's client
    address comes from behind a reverse proxy (console/signin.py client_address).

    Unset, the header is none: the address is the connection's peer (REMOTE_ADDR), which
    a client cannot forge. Set (`X-Forwarded-For`, `X-Real-IP`), the address is the entry
    that many places from the right of that header's comma-separated list: the one your
    own proxies wrote (entries further left came from the client and prove nothing).
    Returns the header as Django's request.META names it (HTTP_X_FORWARDED_FOR) and the
    count; a malformed name or count stops start-up."""
    raw = (get("STEWARD_CLIENT_IP_HEADER") or "").strip()
    if raw and not HEADER_NAME.fullmatch(raw):
        raise ImproperlyConfigured(f"STEWARD_CLIENT_IP_HEADER={raw[:80]!r} is not a header name (X-Forwarded-For)")
    proxies = get_number("STEWARD_CLIENT_IP_PROXIES", 1, minimum=1, maximum=10, integer=True)
    return ("HTTP_" + raw.upper().replace("-", "_") if raw else ""), proxies
