"""Workers' credentials (runtime/authz/credentials.py, `steward workers credentials`):
kept hashed, revocable once, each change audited; and a worker process's settings never
hold the signing key (console/env.py STEWARD_PROCESS=worker; docs/adr/0034-token-minting.md)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from console import env
from runtime.authz.credentials import credential_parse, worker_credential_create, worker_credential_revoke
from runtime.errors import WorkerCredentialNotFound, WorkerCredentialRefused
from runtime.models import AuditEvent, WorkerCredential


def steward(*args) -> str:
    out = io.StringIO()
    call_command("steward", "--actor", "user:root", "workers", "credentials", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_credential_is_shown_once_kept_as_its_hash_and_its_making_is_audited(db):
    made = worker_credential_create(name="worker-a", actor="user:root")
    ident, secret = credential_parse(made.secret)
    row = WorkerCredential.objects.get(id=ident)
    assert row.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(list(WorkerCredential.objects.values()))  # nowhere but in the answer
    (event,) = AuditEvent.objects.filter(kind="worker_credential.created")
    assert (event.actor, event.tenant, event.data) == ("user:root", "", {"credential": ident, "name": "worker-a"})
    assert secret not in str(event.data)


def test_revoking_wins_once_and_is_audited_once(db):
    ident = worker_credential_create(name="worker-a", actor="user:root").credential.id
    assert worker_credential_revoke(credential=ident, actor="user:root", reason="retired") is True
    assert worker_credential_revoke(credential=ident, actor="user:root") is False
    assert AuditEvent.objects.filter(kind="worker_credential.revoked").count() == 1
    assert WorkerCredential.objects.get(id=ident).revoked_by == "user:root"
    for missing in ("0" * 16, "not-an-id", "", None, "a" * 500):
        with pytest.raises(WorkerCredentialNotFound):
            worker_credential_revoke(credential=missing, actor="user:root")


@pytest.mark.parametrize(
    "given",
    [None, "", "swc", "swc..", "swc.0123456789abcdef", "Swc.0123456789abcdef." + "a" * 43, "x" * 10_000, "swc.é"],
)
def test_a_malformed_credential_is_refused_before_any_lookup(given):
    with pytest.raises(WorkerCredentialRefused) as refused:
        credential_parse(given)
    assert refused.value.details["reason"] in ("missing", "malformed")


def test_the_cli_makes_lists_replaces_and_revokes(db):
    first = steward("create", "make-run", "--secret-only").strip()
    assert credential_parse(first)
    second = steward("create", "make-run", "--replace")
    assert "STEWARD_WORKER_CREDENTIAL=swc." in second
    old, new = first.split(".")[1], second.split()[0]
    assert WorkerCredential.objects.get(id=old).revoked_at is not None  # --replace revoked it
    listed = steward("list")
    assert old in listed and new in listed
    assert steward("revoke", new, "--reason", "done").strip() == f"{new} revoked"
    assert steward("revoke", new).strip() == f"{new} was revoked already"
    with pytest.raises(CommandError, match="WORKER_CREDENTIAL_NOT_FOUND"):
        steward("revoke", "f" * 16)
    with pytest.raises(CommandError, match="INVALID_ARGUMENT"):
        steward("create")


def test_a_worker_process_never_reads_the_signing_key_even_in_debug(monkeypatch, tmp_path):
    monkeypatch.delenv("STEWARD_CAPABILITY_KEY", raising=False)
    monkeypatch.setenv("STEWARD_PROCESS", "worker")
    assert env.capability_key(True) is None
    found = env.dev_secrets(tmp_path / "secrets.env")  # made here, with all three in the file
    assert "STEWARD_CAPABILITY_KEY" in (tmp_path / "secrets.env").read_text()
    assert "STEWARD_CAPABILITY_KEY" not in found and "STEWARD_SECRET_KEY" in found
    monkeypatch.setenv("STEWARD_CAPABILITY_KEY", "anything")
    with pytest.raises(ImproperlyConfigured, match="worker process"):
        env.capability_key(True)  # given one: said at start-up, never used
    monkeypatch.setenv("STEWARD_PROCESS", "sandbox")
    with pytest.raises(ImproperlyConfigured, match="STEWARD_PROCESS"):
        env.process_role()
    monkeypatch.setenv("STEWARD_WORKER_CREDENTIAL", "swc.nope")
    with pytest.raises(ImproperlyConfigured, match="STEWARD_WORKER_CREDENTIAL") as said:
        env.worker_credential()
    assert "nope" not in str(said.value)  # never echoed


@pytest.mark.integration
def test_a_celery_worker_that_would_hold_the_key_refuses_to_start(child_env):
    """Started without STEWARD_PROCESS=worker, in debug, a worker would load the install's
    key: it stops before taking any work, naming what to do."""
    environ = {k: v for k, v in child_env.items() if k not in ("STEWARD_PROCESS", "STEWARD_WORKER_CREDENTIAL")}
    argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "--pool=solo", "-Q", "nothing-here"]
    done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "STEWARD_PROCESS=worker" in done.stdout + done.stderr
