"""`make run`'s launcher (console/dev/run.py): its summary, its port, and the demo's
notification service as it starts it. (The whole launcher is tried by hand: it binds
fixed ports and starts every process.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from console.dev import run
from console.dev.demo.fake_service import call
from console.dev.demo.logins import DEMO_ADMIN, DEMO_PEOPLE
from tests.harness import REPO


def test_the_summary_names_the_pages_on_the_chosen_port_the_demo_login_and_how_to_stop():
    text = "\n".join(run.summary(8031))

    assert "http://127.0.0.1:8031/\n" in text and "http://127.0.0.1:8031/admin/\n" in text
    assert "http://127.0.0.1:8031/api/v1/docs\n" in text
    assert "8000" not in text
    for username, (tenant, role, password) in DEMO_PEOPLE.items():
        assert f"{username} / {password}  ({role} of {tenant})" in text
    assert f"{DEMO_ADMIN[0]} / {DEMO_ADMIN[1]}" in text
    assert "Ctrl-C stops every process" in text
    assert ".venv/bin/python manage.py steward tasks" in text


@pytest.mark.parametrize(("raw", "port"), [(None, 8000), ("8031", 8031), ("1", 1), ("65535", 65535)])
def test_steward_port_chooses_the_web_servers_port(monkeypatch, raw, port):
    if raw is None:
        monkeypatch.delenv("STEWARD_PORT", raising=False)
    else:
        monkeypatch.setenv("STEWARD_PORT", raw)
    assert run.port_setting() == port
    assert run.service_commands(port)["web"][-4:] == ["--host", "127.0.0.1", "--port", str(port)]


@pytest.mark.process
@pytest.mark.parametrize("raw", ["", "0", "65536", "80a", "-1", " 8000", "8e3"])
def test_a_steward_port_that_is_not_a_port_stops_make_run_before_it_starts_anything(raw):
    ran = subprocess.run(
        [sys.executable, "-m", "console.dev.run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "STEWARD_PORT": raw},
        timeout=60,
    )

    assert ran.returncode == 1
    assert "STEWARD_PORT must be a port number from 1 to 65535" in ran.stderr
    assert ran.stdout == ""  # not even migrate ran


@pytest.mark.process
def test_the_demos_notification_service_as_make_run_starts_it_drops_the_first_send():
    argv = run.service_commands(8000)["notify"]
    argv[argv.index("--port") + 1] = "0"  # any free port, not the demo's
    with subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, text=True) as service:
        try:
            url = re.search(r"listening on (http://\S+)", service.stdout.readline()).group(1)
            with pytest.raises(ConnectionError):  # performed, the receipt lost: `unknown`
                call(url, {"to": "oncall@example.com"}, key="first")
            assert call(url, {"to": "oncall@example.com"}, key="second")["op_id"] == "op-0002"
        finally:
            service.terminate()
            service.wait(10)


def test_make_run_gives_the_model_key_to_the_web_process_and_the_fake_model_only(monkeypatch):
    monkeypatch.setenv("STEWARD_MODEL_KEY", "sk-from-the-shell")  # a key the operator exported
    monkeypatch.setenv("STEWARD_MODEL_URL", "https://provider.example/v1")
    extra = run.provider_env(8031)
    envs = {name: run.child_env(name, extra) for name in run.service_commands(8031)}
    assert envs["web"]["STEWARD_MODEL_KEY"] == "sk-from-the-shell"
    assert envs["web"]["STEWARD_MODEL_URL"] == "https://provider.example/v1"
    holders = {name for name, env in envs.items() if "sk-from-the-shell" in env.values()}
    assert holders == {"web", "model"}
    assert envs["worker"]["STEWARD_GATEWAY_URL"] == "http://127.0.0.1:8031"


def test_make_run_without_a_provider_points_the_gateway_at_the_fake_model_with_a_fresh_key(monkeypatch):
    monkeypatch.delenv("STEWARD_MODEL_URL", raising=False)
    monkeypatch.delenv("STEWARD_MODEL_KEY", raising=False)
    extra = run.provider_env(8000)
    key = extra["web"]["STEWARD_MODEL_KEY"]
    assert key.startswith("sk-demo-") and extra["model"] == {"STEWARD_MODEL_KEY": key}
    assert extra["web"]["STEWARD_MODEL_URL"] == run.DEMO_MODEL_URL + "/v1"
    assert run.service_commands(8000)["model"][-1] == run._port(run.DEMO_MODEL_URL)
    assert all(key not in run.child_env(name, extra).values() for name in ("worker", "beat", "demo"))


def test_make_run_gives_the_schema_owners_address_to_migrate_alone(monkeypatch):
    """Every other child connects as the application role (DATABASE_URL), which owns
    nothing (runtime/roles.py); the seeding included."""
    monkeypatch.setenv("STEWARD_MIGRATE_DATABASE_URL", "postgresql://steward_owner@/steward?host=/x")
    monkeypatch.setenv("DATABASE_URL", "postgresql://steward_app@/steward?host=/x")
    extra = run.provider_env(8000)
    names = [*run.setup_commands(), *run.service_commands(8000), *run.after_summary_commands()]
    holders = {name for name in names if "STEWARD_MIGRATE_DATABASE_URL" in run.child_env(name, extra)}
    assert holders == {"migrate"}
    assert all(run.child_env(name, extra)["DATABASE_URL"].startswith("postgresql://steward_app@") for name in names)
