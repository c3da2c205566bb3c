"""Django settings for Steward. Everything deployment-specific comes from the environment.

See docs/deploy.md for every variable. Malformed values stop start-up (console/env.py).
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from console import env

BASE_DIR = env.BASE_DIR

# Off unless asked for: `make run`, `make test` and the tests set STEWARD_DEBUG=1
# (Makefile, pyproject's pytest env). Off, a missing STEWARD_SECRET_KEY stops start-up;
# on, it is this install's own, random, made on first use into .steward/secrets.env.
DEBUG = env.get_bool("STEWARD_DEBUG", False)
# How long an attempt owns its task without a heartbeat; the database timeouts below
# are derived from it (docs/adr/0012-bounded-stale-owners.md).
_LEASE_SECONDS = env.get_number("STEWARD_LEASE_SECONDS", 30.0, minimum=0.2)
SECRET_KEY = env.secret("STEWARD_SECRET_KEY", DEBUG)
if not SECRET_KEY:
    raise ImproperlyConfigured("STEWARD_SECRET_KEY must be set when STEWARD_DEBUG is off")
ALLOWED_HOSTS = [h.strip() for h in (env.get("STEWARD_ALLOWED_HOSTS") or "localhost,127.0.0.1").split(",") if h.strip()]

INSTALLED_APPS = [
    # Django's admin with Steward's site (console/admin_site.py): sign-in throttled, every
    # object lookup scoped to the person's tenants.
    "console.admin_site.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "guardian",
    # Sign-in throttling (console/signin.py); its tables come with its own migrations.
    "axes",
    "django_htmx",
    "template_partials",
    # Only for its templates and static files: the API docs page then loads Swagger UI
    # from our own static files instead of a CDN (ninja/openapi/docs.py).
    "ninja",
    "runtime",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy of every response (SECURE_CSP below, console/csp.py).
    "console.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a sign-in its backend refused into the lockout
    # answer (console/signin.py locked_out), under ASGI too (SignInThrottleMiddleware).
    "console.signin.SignInThrottleMiddleware",
]
# The credential gateway's routes (/gateway/, console/gateway/handler.py) run this chain
# instead: a machine's call with a capability token needs no session, CSRF check,
# sign-in or messages, and each sync middleware is a hop to a thread per request. It
# keeps the security headers and the Content-Security-Policy every answer carries.
GATEWAY_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "console.csp.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env.get("DATABASE_URL")
if not _database_url:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set. Run through `make run` / `make test`, which start the "
        "embedded PostgreSQL, or point DATABASE_URL at a PostgreSQL server."
    )
_default_db = env.database_from_url(_database_url)
# psycopg 3 connection pool (Django >= 5.1). Pooling forbids persistent connections, so
# CONN_MAX_AGE stays 0: "closing" a connection hands it back to the pool.
_default_db["OPTIONS"]["pool"] = {
    "min_size": env.get_number("STEWARD_DB_POOL_MIN", 1, minimum=0, integer=True),
    "max_size": env.get_number("STEWARD_DB_POOL_MAX", 8, minimum=1, integer=True),
    "timeout": env.get_number("STEWARD_DB_POOL_TIMEOUT", 10, minimum=0.1),
}
# The runtime's hot statements (runtime/db.py) are prepared server-side. Turn this off
# only behind a pooler that cannot carry prepared statements (PgBouncer < 1.21 in
# transaction mode); Django's own queries never prepare either way.
if env.get_bool("STEWARD_DB_PREPARED_STATEMENTS", True):
    _default_db["OPTIONS"]["prepare_threshold"] = 5


def _bounded(db: dict) -> dict:
    """The connection's options under the bounds of env.connection_bounds; options given
    in the URL (?options=-c ...) come last, so they win."""
    bounds = env.connection_bounds(_LEASE_SECONDS)
    bounds["options"] = " ".join(filter(None, [bounds["options"], db["OPTIONS"].get("options")]))
    db["OPTIONS"] = {
        **bounds,
        **{k: v for k, v in db["OPTIONS"].items() if k != "options"},
        "options": bounds["options"],
    }
    return db


_bounded(_default_db)
# The pool checks an idle connection before lending it out, so after a server restart
# a worker gets a live connection instead of each dead one in turn.
_default_db["CONN_HEALTH_CHECKS"] = True
DATABASES = {"default": _default_db}
# The schema's owner, for `manage.py migrate` alone (runtime/management/commands/migrate.py):
# the application's role (DATABASE_URL) owns nothing, so it cannot TRUNCATE, alter a
# table or switch a trigger off (docs/adr/0022-database-roles.md). Unset, migrate runs as
# DATABASE_URL's role, as one-role deployments do.
_migrate_url = env.get("STEWARD_MIGRATE_DATABASE_URL")
if _migrate_url:
    _owner_db = env.database_from_url(_migrate_url, "STEWARD_MIGRATE_DATABASE_URL")
    if _owner_db["NAME"] != _default_db["NAME"]:
        # A process pointed at another database through DATABASE_URL alone would
        # otherwise migrate the first one.
        raise ImproperlyConfigured(
            f"STEWARD_MIGRATE_DATABASE_URL names database {_owner_db['NAME']!r}, DATABASE_URL {_default_db['NAME']!r}: "
            "they must name the same one (only the role differs)"
        )
    DATABASES["owner"] = _bounded(_owner_db)
# The worker role's address (docs/adr/0035-web-and-worker-roles.md): the launchers give it
# to workers, beat and supervisors as their DATABASE_URL (env.as_worker); here only its
# role is read, for `manage.py migrate` to grant it the worker's profile.
_worker_url = env.get("STEWARD_WORKER_DATABASE_URL")
_worker_role = env.database_from_url(_worker_url, "STEWARD_WORKER_DATABASE_URL")["USER"] if _worker_url else None

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTHENTICATION_BACKENDS = [
    # First: a locked-out account or address is refused before its password is checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".steward" / "collected-static"

# STEWARD_LOG_FORMAT: "plain" (the default) or "json", one object per line (console/logs.py).
_LOG_FORMAT = env.get("STEWARD_LOG_FORMAT") or "plain"
if _LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"STEWARD_LOG_FORMAT must be plain or json, not {_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "console.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": _LOG_FORMAT}},
    "loggers": {
        # Not propagated: Celery's root handler would print every line a second time.
        "runtime": {"handlers": ["console"], "level": env.get("STEWARD_LOG_LEVEL") or "INFO", "propagate": False},
        # django-axes: a line per failed sign-in and per lockout (usernames and addresses masked).
        "axes": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
# /metrics (console/metrics.py) answers `Authorization: Bearer <STEWARD_METRICS_TOKEN>`
# from anywhere, or a client whose address is in STEWARD_METRICS_ALLOW (loopback unless
# set; empty: the token only); anyone else gets 403. A client's address is REMOTE_ADDR;
# X-Forwarded-For is believed only from STEWARD_TRUSTED_PROXIES (docs/deploy.md).
STEWARD_METRICS_TOKEN = env.get("STEWARD_METRICS_TOKEN") or ""
STEWARD_METRICS_ALLOW = env.networks("STEWARD_METRICS_ALLOW", "127.0.0.0/8,::1")
STEWARD_TRUSTED_PROXIES = env.networks("STEWARD_TRUSTED_PROXIES", "")

# --- Celery: transport only. PostgreSQL decides what runs (docs/adr/0002-postgres-decides.md). ---
REDIS_URL = env.get("REDIS_URL")
if not REDIS_URL:
    raise ImproperlyConfigured(
        "REDIS_URL is not set. Run through `make run` / `make test`, which start the "
        "embedded Redis, or point REDIS_URL at a Redis server."
    )
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# A message is only a hint that a pool may have work; losing one is harmless because
# the supervisor re-enqueues whatever the database says is due. So ack on receipt and
# prefetch one: a worker never sits on messages another worker could serve.
CELERY_TASK_ACKS_LATE = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = env.get("STEWARD_QUEUE") or "steward"

# --- The runtime (runtime/config.py reads these through django.conf.settings). ---
STEWARD = {
    # How long an attempt owns its task without a heartbeat.
    "LEASE_SECONDS": _LEASE_SECONDS,
    # How often the worker renews it; a third of the lease by default.
    "HEARTBEAT_SECONDS": env.get_number("STEWARD_HEARTBEAT_SECONDS", 0.0, minimum=0.0),
    # How many attempts a worker process runs at once (`celery worker --attempts N` says
    # the same): 1 runs each in the process's own thread, a solo worker
    # (docs/adr/0009-solo-workers-and-lease-keeper.md); more makes a dense worker, each
    # attempt in a thread of its own (docs/adr/0033-dense-worker.md).
    "WORKER_ATTEMPTS": env.get_number("STEWARD_WORKER_ATTEMPTS", 1, minimum=1, maximum=10_000, integer=True),
    # How often the supervisor sweep runs (Celery beat or `manage.py steward supervise`).
    "SWEEP_SECONDS": env.get_number("STEWARD_SWEEP_SECONDS", 1.0, minimum=0.05),
    # A queued task whose message has not been picked up for this long is re-enqueued.
    "REDISPATCH_SECONDS": env.get_number("STEWARD_REDISPATCH_SECONDS", 5.0, minimum=0.05),
    # Lease expiries in a row before a task is dead-lettered.
    "MAX_CRASHES": env.get_number("STEWARD_MAX_CRASHES", 3, minimum=1, integer=True),
    # Largest accepted task input, in bytes of canonical JSON (docs/limits.md).
    "MAX_INPUT_BYTES": env.get_number("STEWARD_MAX_INPUT_BYTES", 64 * 1024, minimum=2, integer=True),
    # Largest recorded step output or receipt, in bytes of JSON.
    "MAX_OUTPUT_BYTES": env.get_number("STEWARD_MAX_OUTPUT_BYTES", 1024 * 1024, minimum=2, integer=True),
    # Modules whose import registers agents. None by default: the demo's agents are
    # examples, registered only where asked for (`make run` and the tests name them).
    "AGENT_MODULES": [m.strip() for m in (env.get("STEWARD_AGENT_MODULES") or "").split(",") if m.strip()],
    # Pool created on first use (audited) for tasks that name none.
    "DEFAULT_POOL": {"name": "default", "max_running": 50, "max_queued": 10000},
    # Seal every audit chain head that moved this often (runtime/trail/seals.py).
    "AUDIT_SEAL_SECONDS": env.get_number("STEWARD_AUDIT_SEAL_SECONDS", 60.0, minimum=0.1),
    # The HMAC keys of the seals, kept outside the database: the first seals, the rest
    # (STEWARD_AUDIT_SEAL_OLD_KEYS, after a rotation) only check older seals. Unset: in
    # debug, this install's own; otherwise derived from the secret key, which is also kept
    # outside the database.
    "AUDIT_SEAL_KEYS": env.audit_seal_keys(SECRET_KEY, DEBUG),
    # The Ed25519 key that signs capability tokens (runtime/authz/tokens.py); in debug,
    # unset, this install's own; otherwise unset, no token can be minted. A worker
    # (STEWARD_PROCESS=worker) never has it: it asks the web side's minting service
    # (/gateway/tokens) with its own credential (docs/adr/0034-token-minting.md).
    "PROCESS": env.process_role(),
    "CAPABILITY_KEY": env.capability_key(DEBUG),
    "WORKER_CREDENTIAL": env.worker_credential(),
    # `manage.py migrate` connects as the owner when configured (DATABASES["owner"]) and
    # then gives each application role its profile (runtime/roles.py): the web role,
    # DATABASE_URL's, and the worker role, STEWARD_WORKER_DATABASE_URL's when it is set
    # (docs/adr/0035-web-and-worker-roles.md). Unset, workers connect as the web role.
    "MIGRATE_DATABASE": "owner" if "owner" in DATABASES else "default",
    "DB_ROLES": {"web": _default_db["USER"], **({"worker": _worker_role} if _worker_role else {})},
    # Where a worker's ctx.model() and ctx.tool() reach the credential gateway
    # (runtime/gateway/client.py); the gateway is this web process's /gateway/.
    "GATEWAY_URL": env.http_url("STEWARD_GATEWAY_URL", "http://127.0.0.1:8000"),
    # Whether the gateway waits for the WAL flush of an admitted call's decision before
    # forwarding it (denials always do): docs/adr/0014-credential-gateway.md.
    "GATEWAY_DURABLE_ADMIT": env.get_bool("STEWARD_GATEWAY_DURABLE_ADMIT", False),
    # A stop (runtime/stops/) waits this long at each level of a tree for its boundaries'
    # acknowledgments (leaves first, each level up one bound later), then cancels anyway,
    # listing what never answered. A worker whose step ignores a stop for STOP_GRACE_SECONDS
    # ends its attempt by force (runtime/worker/).
    "STOP_BOUND_SECONDS": env.get_number("STEWARD_STOP_BOUND_SECONDS", 30.0, minimum=0.1, maximum=86_400.0),
    "STOP_GRACE_SECONDS": env.get_number("STEWARD_STOP_GRACE_SECONDS", 10.0, minimum=0.0, maximum=86_400.0),
    # Separation of duties for approvals (runtime/approvals/): the person who started a
    # task cannot approve its requests. Deny is still theirs to give.
    "APPROVAL_SEPARATION_OF_DUTIES": env.get_bool("STEWARD_APPROVAL_SEPARATION_OF_DUTIES", True),
    # Longest a ctx.request_approval() may wait for a person (its expires_in).
    "APPROVAL_MAX_SECONDS": env.get_number(
        "STEWARD_APPROVAL_MAX_SECONDS", 30 * 86_400.0, minimum=1.0, maximum=366 * 86_400.0
    ),
    # Largest pool limits an operator may set (docs/limits.md). Each running place is a
    # slot row, hence a bound well below the column's; running + queued must fit the
    # integer arithmetic of admission (steward_submit), hence the queued bound's maximum.
    "POOL_MAX_RUNNING": env.get_number("STEWARD_POOL_MAX_RUNNING", 10_000, minimum=1, maximum=1_000_000, integer=True),
    "POOL_MAX_QUEUED": env.get_number(
        "STEWARD_POOL_MAX_QUEUED", 10_000_000, minimum=0, maximum=2**31 - 1 - 1_000_000, integer=True
    ),
    # The fleet's breakers (runtime/limits/breakers.py, docs/limits.md): a task past one is
    # blocked for an operator (`breaker_tripped`). An agent's declaration narrows or
    # widens them (`@agent(..., breakers={...})`); an operator's resume can raise one
    # task's. The bounds are runtime/arguments.py BREAKER_LIMITS.
    "BREAKERS": {
        "max_children": env.get_number(
            "STEWARD_BREAKER_MAX_CHILDREN", 1_000, minimum=1, maximum=1_000_000, integer=True
        ),
        "max_depth": env.get_number("STEWARD_BREAKER_MAX_DEPTH", 10, minimum=1, maximum=1_000, integer=True),
        "max_spawns_per_minute": env.get_number(
            "STEWARD_BREAKER_MAX_SPAWNS_PER_MINUTE", 6_000, minimum=1, maximum=1_000_000, integer=True
        ),
        "max_steps": env.get_number("STEWARD_BREAKER_MAX_STEPS", 100_000, minimum=1, maximum=2**31 - 1, integer=True),
        "max_wall_clock_seconds": env.get_number(
            "STEWARD_BREAKER_MAX_WALL_CLOCK_SECONDS", 7 * 86_400, minimum=1, maximum=10 * 366 * 86_400, integer=True
        ),
    },
}
# --- The credential gateway (console/gateway/): the provider keys, read here and only
# here, by the web process. Give them to the web process alone, never to a worker
# (docs/deploy.md): a worker reaches providers through /gateway/ with a capability token.
GATEWAY = {
    # An OpenAI-compatible base URL (.../v1 is added by nothing: give the URL the
    # provider's /chat/completions hangs off) and its API key.
    "MODEL_URL": env.http_url("STEWARD_MODEL_URL", None),
    "MODEL_KEY": env.get("STEWARD_MODEL_KEY") or "",
    # Outside HTTP APIs: {"name": {"url": ..., "key": ..., "header": "Authorization"}}.
    "TOOLS": env.gateway_tools("STEWARD_TOOLS"),
    # How long the gateway waits for a provider's answer (or its next chunk).
    "TIMEOUT_SECONDS": env.get_number("STEWARD_GATEWAY_TIMEOUT_SECONDS", 120.0, minimum=0.1),
    # Threads that run the gateway's database statements (console/gateway/database.py),
    # each holding at most one of the process's pooled connections: however many streams
    # are open, the gateway holds no more connections than this (4, or the pool's size if
    # smaller; never more than the pool's size, or its threads would wait on each other).
    "DB_THREADS": env.get_number(
        "STEWARD_GATEWAY_DB_THREADS",
        min(4, _default_db["OPTIONS"]["pool"]["max_size"]),
        minimum=1,
        maximum=_default_db["OPTIONS"]["pool"]["max_size"],
        integer=True,
    ),
}
if GATEWAY["MODEL_URL"] and not GATEWAY["MODEL_KEY"]:
    raise ImproperlyConfigured("STEWARD_MODEL_URL is set but STEWARD_MODEL_KEY is not")
for _limit in ("max_running", "max_queued"):
    if STEWARD["DEFAULT_POOL"][_limit] > STEWARD[f"POOL_{_limit.upper()}"]:
        raise ImproperlyConfigured(f"STEWARD_POOL_{_limit.upper()} is below the default pool's {_limit}")
CELERY_BEAT_SCHEDULE = {
    "steward-supervisor-sweep": {
        "task": "runtime.sweep",
        "schedule": STEWARD["SWEEP_SECONDS"],
        # A sweep that could not start in time is superseded by the next one.
        "options": {"expires": max(STEWARD["SWEEP_SECONDS"] * 2, 1.0)},
    },
}

# --- The console (console/ui): sign-in pages ---
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# --- HTTPS and cookies in production (docs/deploy.md section 3;
# docs/adr/0024-deployment-hardening.md).
# Production is STEWARD_DEBUG off; debug (`make run`, the tests) serves plain HTTP on
# loopback, so none of the HTTPS defaults apply there.
# Behind a proxy that ends TLS, Django learns a request was HTTPS only from a header the
# proxy sets. Trusting one lets any client that reaches the web tier directly claim
# HTTPS: set it only if every request comes through a proxy that sets or strips it.
SECURE_PROXY_SSL_HEADER = env.proxy_ssl_header("STEWARD_PROXY_SSL_HEADER")
SECURE_SSL_REDIRECT = env.get_bool("STEWARD_SSL_REDIRECT", not DEBUG)
# Machine paths, reached over the internal network (workers at STEWARD_GATEWAY_URL,
# Prometheus at /metrics): their credential goes with the first request, so a redirect
# would protect nothing and only break a plain-HTTP internal address.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^gateway/"]
SECURE_HSTS_SECONDS = env.get_number("STEWARD_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0, integer=True)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.get_bool("STEWARD_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env.get_bool("STEWARD_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
CSRF_TRUSTED_ORIGINS = env.origins("STEWARD_CSRF_TRUSTED_ORIGINS")
# `check --deploy` warns while each of these is off. Off because the operator said so
# (the proxy redirects or sends HSTS itself; sibling hosts without HTTPS; no preload list),
# the question is answered; off by default, the warning stands until someone decides.
SILENCED_SYSTEM_CHECKS = [
    check
    for variable, check in (
        ("STEWARD_SSL_REDIRECT", "security.W008"),
        ("STEWARD_HSTS_SECONDS", "security.W004"),
        ("STEWARD_HSTS_INCLUDE_SUBDOMAINS", "security.W005"),
        ("STEWARD_HSTS_PRELOAD", "security.W021"),
    )
    if env.chosen_off(variable)
] + [
    # django-axes looks for its middleware by name; MIDDLEWARE has its subclass
    # (console.signin.SignInThrottleMiddleware), and the sign-in tests hold it to its job.
    "axes.W002",
]

# --- The browser's policy (docs/deploy.md; docs/adr/0024-deployment-hardening.md).
# The browser runs only this site's own files: no inline script or style, no eval, no
# framing, forms post only here (console/csp.py; in debug too, so `make run` and the
# browser tests run under it). The shape of Django 6's SECURE_CSP: on Django 6, its
# django.middleware.csp.ContentSecurityPolicyMiddleware takes this setting unchanged.
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    # data: for the console's empty favicon and the images the admin's and Swagger UI's
    # stylesheets embed.
    "img-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}

# --- Sign-in throttling: django-axes, by account and by client address (console/signin.py,
# docs/adr/0026-admin-scope-and-sign-in-throttling.md). Bearer tokens never sign in, so the API is not throttled.
# STEWARD_SIGNIN_FAILURE_LIMIT failed sign-ins for one username (existing or not), or from
# one client address, within a cool-off of each other lock that username, or that address,
# for STEWARD_SIGNIN_COOLOFF_SECONDS after the last of them: every sign-in it tries then,
# the right password included, is refused with 429 and the lockout message.
AXES_FAILURE_LIMIT = env.get_number("STEWARD_SIGNIN_FAILURE_LIMIT", 5, minimum=1, maximum=1_000, integer=True)
AXES_COOLOFF_TIME = timedelta(
    seconds=env.get_number("STEWARD_SIGNIN_COOLOFF_SECONDS", 900, minimum=1, maximum=30 * 86_400, integer=True)
)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A refused attempt is not counted: a lock ends one cool-off after the failure that set
# it, so "try again in 15 minutes" stays true for the person, while a guesser gets
# AXES_FAILURE_LIMIT tries per cool-off, per account and per address.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A success keeps the failures: axes would wipe every row of the client's address too,
# and an attacker with an account of their own could sign in between guesses at another's.
AXES_RESET_ON_SUCCESS = False
# The client's address: the connection's peer, or behind a proxy the header it names
# (STEWARD_CLIENT_IP_HEADER, STEWARD_CLIENT_IP_PROXIES; docs/deploy.md).
STEWARD_CLIENT_IP_HEADER, STEWARD_CLIENT_IP_PROXIES = env.client_address_header()
AXES_CLIENT_IP_CALLABLE = "console.signin.client_address"
# The lockout: its audit event, and the sign-in page with the message, as a 429.
AXES_LOCKOUT_CALLABLE = "console.signin.locked_out"
AXES_HTTP_RESPONSE_CODE = 429
# Axes' tables name the people and addresses of every tenant: no admin pages for them
# (unlock with `manage.py axes_reset_username NAME` or `axes_reset_ip ADDRESS`).
AXES_ENABLE_ADMIN = False
# A successful sign-in is already Django's last_login; nothing would prune a log of them.
AXES_DISABLE_ACCESS_LOG = True
