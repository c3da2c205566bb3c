"""`manage.py steward workers credentials list|create|revoke`: workers' own credentials,
with which a worker asks the minting service for its attempts' tokens
(runtime/authz/credentials.py, docs/adr/0034-token-minting.md).

    workers credentials list
    workers credentials create NAME [--replace] [--secret-only]
    workers credentials revoke ID [--reason R]

`create` prints the credential (`swc.<id>.<secret>`) once: give it to that worker as
STEWARD_WORKER_CREDENTIAL; only its hash is kept. --replace first revokes the live
credentials of the same name (a rotation, or `make run` starting again); --secret-only
prints the credential alone, for a launcher to read."""

from __future__ import annotations

from runtime.authz.credentials import worker_credential_create, worker_credential_revoke, worker_credentials
from runtime.errors import InvalidArgument
from runtime.management.format import table, when

OPERATIONS = ("list", "create", "revoke")


def add_parser(sub) -> None:
    p = sub.add_parser("workers", help="workers' credentials for the minting service")
    p.add_argument("what", choices=("credentials",))
    p.add_argument("op", choices=OPERATIONS)
    p.add_argument("subject", nargs="?", help="create: the worker's name; revoke: the credential's id")
    p.add_argument("--replace", action="store_true", help="create: revoke the live ones of this name first")
    p.add_argument("--secret-only", action="store_true", help="create: print only the credential")
    p.add_argument("--reason", default="", help="revoke: why, for the audit trail")


def run(out, *, actor, op, subject, replace, secret_only, reason, **_) -> None:
    if op == "list":
        rows = [
            [
                c.id,
                c.name,
                when(c.created_at),
                c.created_by,
                when(c.revoked_at) if c.revoked_at else "-",
                c.uses,
                when(c.last_used_at) if c.last_used_at else "-",
            ]
            for c in worker_credentials()
        ]
        out.write(table(["id", "name", "created", "by", "revoked", "uses", "last used"], rows))
        return
    if subject is None:
        raise InvalidArgument(
            f"workers credentials {op} needs {'a name' if op == 'create' else 'an id'}", field="subject"
        )
    if op == "revoke":
        revoked = worker_credential_revoke(credential=subject, actor=actor, reason=reason)
        out.write(f"{subject} {'revoked' if revoked else 'was revoked already'}\n")
        return
    if replace:
        for old in worker_credentials():
            if old.name == subject and old.revoked_at is None:
                worker_credential_revoke(
                    credential=old.id, actor=actor, reason=f"replaced by a new credential for {subject}"
                )
    made = worker_credential_create(name=subject, actor=actor)
    if secret_only:
        out.write(made.secret + "\n")
        return
    out.write(
        f"{made.credential.id}  made for {subject}. Give this worker, once, in its environment:\n"
        f"STEWARD_WORKER_CREDENTIAL={made.secret}\n"
        "(shown once: only its hash is kept)\n"
    )
