"""Reading configuration from the environment, failing loudly on malformed values.

Settings must never guess: a typo in STEWARD_LEASE_SECONDS should stop the process at
start-up, not silently run with a default that changes how recovery behaves.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = BASE_DIR / ".steward"  # git-ignored
# `make run` / `make test` start embedded PostgreSQL and Redis when DATABASE_URL and
# REDIS_URL are unset, and write their addresses here so that a second terminal
# (`manage.py steward tasks`) finds the same services.
SERVICES_ENV_FILE = STATE_DIR / "services.env"
SERVICES = ("DATABASE_URL", "STEWARD_MIGRATE_DATABASE_URL", "STEWARD_WORKER_DATABASE_URL", "REDIS_URL")
# In debug, the secrets a deployment must set default to random ones of this install,
# made on first use (dev_secrets below) and kept here, readable by the owner only.
SECRETS_FILE = STATE_DIR / "secrets.env"
DEV_SECRETS = ("STEWARD_SECRET_KEY", "STEWARD_CAPABILITY_KEY", "STEWARD_AUDIT_SEAL_KEY")
# STEWARD_PROCESS: which Steward process this is. A worker runs agent code, so it never
# holds the key that signs capability tokens: it asks the web side's minting service for
# each attempt's token with its own credential (docs/adr/0034-token-minting.md). Unset,
# a process is of the web side (web, gateway, beat, the CLI).
PROCESS_ROLES = ("web", "worker")
WORKER = "worker"
# What a worker never reads, from its environment or from this install's debug secrets.
WORKER_WITHHELD = ("STEWARD_CAPABILITY_KEY",)


def process_role() -> str:
    raw = (os.environ.get("STEWARD_PROCESS") or "web").strip().lower()
    if raw not in PROCESS_ROLES:
        raise ImproperlyConfigured(f"STEWARD_PROCESS must be one of {', '.join(PROCESS_ROLES)}, not {raw[:40]!r}")
    return raw


def _read_env_file(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    values = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and not name.startswith("#"):
            values[name.strip()] = value.strip()
    return values


def get(name: str, default: str | None = None) -> str | None:
    if name in os.environ:
        return os.environ[name]
    # The services' addresses come all from the environment or all from the file: a
    # process given DATABASE_URL (a `make run` child, a test's worker) never picks up
    # the owner's URL from a file it was not meant to read.
    if name in SERVICES and "DATABASE_URL" not in os.environ:
        return _read_env_file(SERVICES_ENV_FILE).get(name, default)
    return default


def as_worker(environ: dict[str, str]) -> dict[str, str]:
    """A worker's, beat's or supervisor's environment made from the launcher's: its
    DATABASE_URL is the worker role's (STEWARD_WORKER_DATABASE_URL) when one is given,
    and no other database address goes with it (docs/adr/0035-web-and-worker-roles.md).
    A worker address for another server or database than DATABASE_URL's (a test that
    points one process elsewhere) is dropped, never followed."""
    withheld = ("STEWARD_MIGRATE_DATABASE_URL", "STEWARD_TEST_DATABASE_URL", "STEWARD_WORKER_DATABASE_URL")
    worker, given = environ.get("STEWARD_WORKER_DATABASE_URL"), environ.get("DATABASE_URL")
    if not worker or not given:
        return dict(environ)
    env = {k: v for k, v in environ.items() if k not in withheld}
    place = [(u.hostname, u.port, u.path, u.query) for u in (urlsplit(worker), urlsplit(given))]
    return {**env, "DATABASE_URL": worker} if place[0] == place[1] else env


def secret(name: str, debug: bool) -> str | None:
    """A secret from the environment; in debug, unset, this install's own (dev_secrets)."""
    given = get(name)
    if given or not debug:
        return given or None
    return dev_secrets(SECRETS_FILE)[name]


@functools.cache
def dev_secrets(path: Path) -> dict[str, str]:
    """This install's debug secrets: random, made once into `path` (mode 0600), read from it after.

    Each is drawn on its own, none derived from another or from anything published: the
    Django secret key, the Ed25519 key that signs capability tokens (PEM, newlines as
    `\\n`) and the seals' HMAC key. `make run` starts web, workers and beat at once, so the
    file appears whole or not at all: written under a name of its own, then linked into
    place, which fails if another process linked first; then everyone reads the winner's.
    A file others may read is refused, not used."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        made = {
            "STEWARD_SECRET_KEY": secrets.token_urlsafe(50),
            "STEWARD_CAPABILITY_KEY": pem.decode().strip().replace("\n", "\\n"),
            "STEWARD_AUDIT_SEAL_KEY": secrets.token_hex(32),
        }
        text = "# This install's debug secrets (console/env.py); never used with STEWARD_DEBUG off.\n"
        text += "".join(f"{name}={value}\n" for name, value in made.items())
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w") as file:
                    file.write(text)
                    file.flush()
                    os.fsync(file.fileno())
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process made them first: theirs are this install's
            finally:
                temporary.unlink(missing_ok=True)
        except OSError as exc:
            raise ImproperlyConfigured(
                f"cannot write this install's debug secrets to {path} ({exc.strerror}): "
                f"set {', '.join(DEV_SECRETS)} or make the folder writable"
            ) from None
    if path.stat().st_mode & 0o077:
        raise ImproperlyConfigured(f"{path} holds secrets but others may read it: chmod 600 it")
    found = _read_env_file(path)
    missing = [name for name in DEV_SECRETS if not found.get(name)]
    if missing:
        raise ImproperlyConfigured(f"{path} lacks {', '.join(missing)}: remove it to make new debug secrets")
    if process_role() == WORKER:
        # Not kept in this process's memory either: agent code could read this cache.
        found = {name: value for name, value in found.items() if name not in WORKER_WITHHELD}
    return found


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


def get_list(name: str, default: str) -> list[str]:
    """A comma-separated list; blanks around and between commas are dropped. Set empty,
    the list is empty (not the default)."""
    raw = get(name)
    return [item.strip() for item in (default if raw is None else raw).split(",") if item.strip()]


def networks(name: str, default: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Addresses and networks (`127.0.0.1`, `10.0.0.0/8`, `::1`), comma-separated. Host
    bits set below a network's prefix are a typo more often than not, but harmless: the
    network they name is meant (`10.1.2.3/8` is 10.0.0.0/8)."""
    found = []
    for item in get_list(name, default):
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item[:60]!r} is not an IP address or network") from None
    return found


def origins(name: str) -> list[str]:
    """Origins as browsers send them (`https://steward.example.com`, a port if not the
    scheme's): a scheme, a host, nothing after. Django compares them with the Origin
    header as written, so a path or a missing scheme would match nothing."""
    found = []
    for item in get_list(name, ""):
        parsed = urlparse(item)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.path or parsed.query:
            raise ImproperlyConfigured(f"{name}: {item[:80]!r} is not an origin like https://steward.example.com")
        found.append(item)
    return found


HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto` (the value meaning HTTPS is then `https`) or
    `X-Forwarded-Ssl=on`: Django's SECURE_PROXY_SSL_HEADER, as the WSGI environ names it."""
    raw = (get(name) or "").strip()
    if not raw:
        return None
    header, sep, value = raw.partition("=")
    value = value.strip() if sep else "https"
    if not HEADER_NAME.fullmatch(header.strip()) or not re.fullmatch(r"[\x21-\x7e]{1,64}", value):
        raise ImproperlyConfigured(f"{name}={raw[:80]!r} is not a header name, or NAME=VALUE (X-Forwarded-Proto)")
    return "HTTP_" + header.strip().upper().replace("-", "_"), value


def chosen_off(name: str) -> bool:
    """Whether the operator set `name` to off (0, false, no, off) rather than leaving it
    unset: a decision `manage.py check --deploy` need not ask for again."""
    raw = get(name)
    return raw is not None and raw.strip().lower() in ("0", "false", "no", "off")


def database_from_url(url: str, setting: str = "DATABASE_URL") -> dict:
    """Turn postgres://user:pass@host:port/name?host=/socket/dir into Django's dict.

    The `host` query parameter is how pgserver (the embedded default) names its unix
    socket directory, so it wins over the network location when both are present.
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"{setting} must be a postgres:// URL, got {parsed.scheme!r}")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    name = unquote(parsed.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured(f"{setting} names no database")
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


def audit_seal_keys(secret_key: str, debug: bool) -> list[bytes]:
    """STEWARD_AUDIT_SEAL_KEY, then each of STEWARD_AUDIT_SEAL_OLD_KEYS (comma-separated).
    Without the first: in debug, this install's own (dev_secrets); otherwise one derived
    from the secret key, which a deployment sets and keeps outside the database too. A key
    shorter than 32 bytes is refused: it would be the weak point of every seal."""
    given = secret("STEWARD_AUDIT_SEAL_KEY", debug)
    keys = [given] if given else [hmac.new(secret_key.encode(), b"steward audit seal", hashlib.sha256).hexdigest()]
    keys += [k.strip() for k in (get("STEWARD_AUDIT_SEAL_OLD_KEYS") or "").split(",") if k.strip()]
    for key in keys:
        if len(key.encode()) < 32:
            raise ImproperlyConfigured("STEWARD_AUDIT_SEAL_KEY (and each old key) must be at least 32 bytes")
    return [key.encode() for key in keys]


def capability_key(debug: bool) -> bytes | None:
    """STEWARD_CAPABILITY_KEY: the Ed25519 private key (PEM; `\\n` may stand for newlines
    in a one-line variable) that signs capability tokens (runtime/authz/tokens.py). A
    value that is not an Ed25519 private key stops start-up.

    Unset in debug: this install's own, random (dev_secrets), the same for every process
    of the install, web and workers, and across restarts. Unset otherwise: None, and
    minting a token refuses; nothing mints one until the gateway is configured. A worker
    (STEWARD_PROCESS=worker) has none, whatever the environment or debug says. No key is
    ever derived from another setting: the one debug once derived from a published
    constant signed tokens that any `make run` gateway accepted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if process_role() == WORKER:
        # A worker asks the minting service for its tokens (docs/adr/0034-token-minting.md);
        # one given the key anyway is a deployment mistake, said at start-up.
        if os.environ.get("STEWARD_CAPABILITY_KEY"):
            raise ImproperlyConfigured(
                "STEWARD_CAPABILITY_KEY is set for a worker process (STEWARD_PROCESS=worker): give the signing "
                "key to the web process alone; a worker gets its tokens with STEWARD_WORKER_CREDENTIAL"
            )
        return None
    given = secret("STEWARD_CAPABILITY_KEY", debug)
    if not given:
        return None
    pem = given.replace("\\n", "\n").encode()
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"STEWARD_CAPABILITY_KEY is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured("STEWARD_CAPABILITY_KEY must be an Ed25519 private key")
    return pem


WORKER_CREDENTIAL = re.compile(r"swc\.[0-9a-f]{16}\.[A-Za-z0-9_-]{43}")


def worker_credential() -> str | None:
    """STEWARD_WORKER_CREDENTIAL: this worker's own credential (`swc.<id>.<secret>`, made
    by `manage.py steward workers credentials create`), with which it asks the minting
    service for its attempts' tokens. A malformed one stops start-up without echoing it."""
    raw = (get("STEWARD_WORKER_CREDENTIAL") or "").strip()
    if not raw:
        return None
    if not WORKER_CREDENTIAL.fullmatch(raw):
        raise ImproperlyConfigured("STEWARD_WORKER_CREDENTIAL is not a worker credential (swc.<id>.<secret>)")
    return raw


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
