"""A hostile isolated agent (`isolation="process"`, tests/isolated_agents.py iso.hostile)
tries, one task per row, what agent code running model-written code might: read the
harness's environment, files and processes, reach PostgreSQL, Redis, the gateway or any
address, mint a token, and write the journal out of order over its pipe. Each is refused,
and the journal holds only what the harness wrote, in order.

Each task starts a real sandbox (bubblewrap), so the module is `process`-marked; the
worker loop itself runs in this process (runtime/testing.py).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from runtime import states
from runtime.testing import StewardTestEnv
from runtime.worker.isolation import sandbox
from tests.isolated_agents import hostile

pytestmark = pytest.mark.process

CANARY = f"canary-{uuid.uuid4().hex}"
ROOT = sandbox.SOURCE_ROOT
SECRETS_FILE = Path(settings.BASE_DIR) / ".steward" / "secrets.env" if hasattr(settings, "BASE_DIR") else None


@pytest.fixture
def steward(transactional_db, monkeypatch):
    # A secret only the harness's environment holds: nothing in the sandbox may show it.
    monkeypatch.setenv("STEWARD_CANARY_SECRET", CANARY)
    with StewardTestEnv() as env:
        yield env


def run_probe(steward, probe: str, arg=None):
    task = steward.submit("iso.hostile", {"probe": probe, "arg": arg})
    steward.run_until_idle()
    return task, steward.result(task)


def secrets() -> list[str]:
    """What the harness holds that the sandbox must never see."""
    held = [CANARY, settings.SECRET_KEY]
    held += [value for key, value in os.environ.items() if len(value) >= 12 and _secret_name(key)]
    database = settings.DATABASES["default"]
    held += [str(database.get("PASSWORD") or "")]
    return [value for value in held if value]


def _secret_name(key: str) -> bool:
    return any(word in key for word in ("KEY", "SECRET", "PASSWORD", "TOKEN", "DATABASE_URL", "REDIS_URL", "DSN"))


def addresses() -> list[tuple[str, int]]:
    """PostgreSQL and Redis where the tests reach them, the usual ports, the gateway,
    and an address outside the machine."""
    found = [("127.0.0.1", 5432), ("127.0.0.1", 6379), ("1.1.1.1", 443), ("10.0.0.1", 80)]
    redis = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    found.append((redis.hostname or "127.0.0.1", redis.port or 6379))
    gateway = urlsplit(settings.STEWARD["GATEWAY_URL"])
    found.append((gateway.hostname or "127.0.0.1", gateway.port or 80))
    database = settings.DATABASES["default"]
    if database.get("HOST", "").startswith(("127.", "localhost")) and database.get("PORT"):
        found.append(("127.0.0.1", int(database["PORT"])))
    return list(dict.fromkeys(found))


# --- what the sandbox can see and reach --------------------------------------------------


def test_no_environment_it_can_read_holds_a_secret(steward):
    _, result = run_probe(steward, "environ")
    assert result.output is not None, (result.status, result.error)
    seen = result.output["got"]
    for secret in secrets():
        assert secret not in seen
    own = json.loads(seen.splitlines()[0])
    assert set(own) <= set(sandbox.ENVIRONMENT) | {"PWD", "LC_CTYPE"}


def test_it_sees_only_its_own_processes(steward):
    _, result = run_probe(steward, "processes")
    seen = result.output["got"]
    assert len(seen) <= 3  # bwrap's init and the interpreter
    assert not [cmd for cmd in seen.values() if "pytest" in cmd or "celery" in cmd or "manage.py" in cmd]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(str(ROOT / ".steward" / "secrets.env"), id="secrets.env"),
        pytest.param(str(ROOT / "console" / "settings.py"), id="settings"),
        pytest.param(str(ROOT / "pyproject.toml"), id="pyproject"),
        pytest.param("/etc/passwd", id="etc"),
        pytest.param(f"/proc/{os.getpid()}/environ", id="harness-environ-by-pid"),
        pytest.param(str(Path.home() / ".bash_history"), id="home"),
    ],
)
def test_it_cannot_read_the_harness_files(steward, path):
    _, result = run_probe(steward, "read", path)
    assert "refused" in result.output, result.output
    assert "Error" in result.output["refused"]


def test_it_cannot_read_the_secrets_file_by_any_name(steward):
    if SECRETS_FILE is None or not SECRETS_FILE.exists():
        pytest.skip("no secrets file on this install")
    _, result = run_probe(steward, "read", str(SECRETS_FILE))
    assert "refused" in result.output


@pytest.mark.parametrize("address", addresses(), ids=lambda a: f"{a[0]}:{a[1]}")
def test_it_cannot_open_a_socket_to_anything(steward, address):
    _, result = run_probe(steward, "connect", list(address))
    assert "refused" in result.output, result.output
    assert result.output["refused"].split(":")[0] in (
        "ConnectionRefusedError",
        "OSError",
        "TimeoutError",
        "PermissionError",
    )


@pytest.mark.parametrize(
    ("path", "written"),
    [
        pytest.param(str(ROOT / "tests" / "isolated_agents.py"), False, id="its-own-code"),
        pytest.param(str(ROOT / "runtime" / "errors.py"), False, id="steward-code"),
        pytest.param("/usr/lib/steward-was-here", False, id="usr"),
        pytest.param("/steward-was-here", False, id="root"),
        pytest.param("/tmp/scratch", True, id="scratch"),
    ],
)
def test_only_the_scratch_directory_is_writable(steward, path, written):
    _, result = run_probe(steward, "write", path)
    assert (result.output.get("got") == "written") is written, result.output


def test_it_runs_unprivileged_with_no_capabilities(steward):
    _, result = run_probe(steward, "status")
    got = result.output["got"]
    assert (got["uid"], got["gid"]) == (65534, 65534)
    assert int(got["CapEff"], 16) == 0 and int(got["CapPrm"], 16) == 0


def test_it_cannot_mint_a_token(steward):
    _, result = run_probe(steward, "mint")
    # Neither the key (no secret in its environment) nor the minting code is in the sandbox.
    assert result.output["refused"].startswith("ModuleNotFoundError"), result.output


# --- writing the journal out of order -----------------------------------------------------

CALL = {"op": "call", "method": "step", "args": {"name": "forged"}}

FRAMES = [
    pytest.param({**CALL, "id": 9}, id="forged-call-id"),
    pytest.param({**CALL, "id": 1}, id="duplicate-call-id"),
    pytest.param({**CALL, "id": True}, id="boolean-call-id"),
    pytest.param({**CALL, "id": 2, "args": {"name": "forged", "seq": 0}}, id="a-seq-of-its-own"),
    pytest.param({**CALL, "id": 2, "args": {"name": 5}}, id="wrong-type"),
    pytest.param({**CALL, "id": 2, "method": "journal_write"}, id="journal-write"),
    pytest.param({"op": "call", "id": 2, "method": "token", "args": {"audience": "model"}}, id="mint-over-the-pipe"),
    pytest.param({"op": "journal", "seq": 1, "name": "forged", "output": 1}, id="unknown-op"),
    pytest.param({"op": "result", "cb": 1, "ok": "forged"}, id="result-out-of-turn"),
    pytest.param({"op": "done", "output": 1, "seq": 4}, id="done-with-extra-fields"),
    pytest.param('{"op": "done", "output": NaN}', id="not-json-nan"),
    pytest.param("[1, 2]", id="not-an-object"),
    pytest.param("giant", id="giant-frame"),
    pytest.param("malformed", id="malformed-frame"),
    pytest.param("truncated_then_exit", id="truncated-frame"),
]


@pytest.mark.parametrize("frame", FRAMES)
def test_a_frame_out_of_protocol_fails_the_task_and_writes_nothing(steward, frame):
    task, result = run_probe(steward, "frame", frame)
    assert result.status == states.FAILED
    assert result.error["code"] == "ISOLATION_PROTOCOL", result.error
    # Only what the harness journaled before the frame, at the seq it gave it.
    assert [(r.seq, r.name) for r in steward.journal(task)] == [(0, "before")]


def test_without_bubblewrap_the_agent_never_runs_unsandboxed(steward, monkeypatch):
    monkeypatch.setattr(sandbox, "BWRAP", "/nonexistent/bwrap")
    monkeypatch.setattr(sandbox.shutil, "which", lambda *a, **k: None)
    task, result = run_probe(steward, "status")
    assert result.status == states.FAILED
    assert result.error["code"] == "ISOLATION_UNAVAILABLE"
    assert "bubblewrap" in result.error["message"]
    assert steward.journal(task) == []


def test_the_hostile_agent_is_registered_as_isolated():
    from runtime import agents

    assert agents.get("iso.hostile").fn is hostile
    assert agents.get("iso.hostile").isolation == "process"
