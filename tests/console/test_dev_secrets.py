"""Debug's secrets are this install's own (console/env.py dev_secrets): random, made once
into .steward/secrets.env with mode 0600, the same for every process after. Nothing
derives a key from a constant any more: a published one once gave every `make run` the
same secret key, and with it the capability and seal keys (tests/console/gateway's
"published constant" misuse shows its token refused)."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured

from console import env
from tests.harness import at_once

# What console/settings.py once fell back to in debug, and what was derived from it.
PUBLISHED = "insecure-dev-key-set-STEWARD_SECRET_KEY-in-production"


def published_capability_pem() -> bytes:
    seed = hmac.new(PUBLISHED.encode(), b"steward capability key", hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def published_seal_key() -> bytes:
    return hmac.new(PUBLISHED.encode(), b"steward audit seal", hashlib.sha256).hexdigest().encode()


def made(path) -> dict[str, str]:
    return env.dev_secrets.__wrapped__(path)  # unmemoised: what a fresh process reads


def test_this_sessions_keys_are_none_of_the_published_ones(settings):
    assert env.get_bool("STEWARD_DEBUG", False)  # (Django's test runner turns settings.DEBUG off)
    assert settings.SECRET_KEY != PUBLISHED
    assert settings.STEWARD["CAPABILITY_KEY"] != published_capability_pem()
    assert published_seal_key() not in settings.STEWARD["AUDIT_SEAL_KEYS"]


def test_debug_secrets_are_made_at_random_once_readable_by_the_owner_alone(tmp_path):
    path = tmp_path / "secrets.env"
    first = made(path)
    assert set(first) >= set(env.DEV_SECRETS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first["STEWARD_SECRET_KEY"]) >= 50
    assert len(bytes.fromhex(first["STEWARD_AUDIT_SEAL_KEY"])) == 32
    pem = first["STEWARD_CAPABILITY_KEY"].replace("\\n", "\n").encode()
    assert isinstance(serialization.load_pem_private_key(pem, password=None), Ed25519PrivateKey)
    assert made(path) == first  # kept, and read back the same
    other = made(tmp_path / "elsewhere" / "secrets.env")  # another install
    assert all(other[name] != first[name] for name in env.DEV_SECRETS)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_processes_starting_at_once_agree_on_one_set(tmp_path):
    """`make run` starts web, two workers and beat together: each makes a candidate, one
    is linked into place, and all read that one."""
    threads, trials = 8, 20
    for trial in range(trials):
        path = tmp_path / f"install-{trial}" / "secrets.env"
        results = at_once(threads, lambda i: made(path))
        assert [r for r in results if isinstance(r, Exception)] == [], trial
        assert len({tuple(sorted(r.items())) for r in results}) == 1, trial
        assert sorted(p.name for p in path.parent.iterdir()) == ["secrets.env"], trial


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_secrets_file_others_may_read_is_refused(tmp_path, mode):
    path = tmp_path / "secrets.env"
    made(path)
    os.chmod(path, mode)
    with pytest.raises(ImproperlyConfigured, match="others may read it"):
        made(path)


def test_a_secrets_file_missing_a_key_is_refused_not_filled_in(tmp_path):
    path = tmp_path / "secrets.env"
    path.write_text("STEWARD_SECRET_KEY=abc\n")
    path.chmod(0o600)
    with pytest.raises(ImproperlyConfigured, match="lacks STEWARD_CAPABILITY_KEY, STEWARD_AUDIT_SEAL_KEY"):
        made(path)


def test_a_secret_set_in_the_environment_wins_and_outside_debug_nothing_is_made(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "SECRETS_FILE", tmp_path / "secrets.env")
    monkeypatch.setenv("STEWARD_SECRET_KEY", "from-the-environment-" + "x" * 40)
    assert env.secret("STEWARD_SECRET_KEY", True) == "from-the-environment-" + "x" * 40
    monkeypatch.delenv("STEWARD_SECRET_KEY")
    assert env.secret("STEWARD_SECRET_KEY", False) is None  # settings then refuse to start
    assert env.capability_key(False) is None
    assert not (tmp_path / "secrets.env").exists()
    assert env.secret("STEWARD_SECRET_KEY", True) == made(tmp_path / "secrets.env")["STEWARD_SECRET_KEY"]


def test_an_unwritable_folder_names_the_settings_to_set_instead(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):  # root writes anywhere
        pytest.skip("this user can write to a read-only folder")
    with pytest.raises(ImproperlyConfigured, match="set STEWARD_SECRET_KEY, STEWARD_CAPABILITY_KEY"):
        made(folder / "secrets.env")
