"""The taint rule, in one place (docs/contracts.md §2): text that came from a model's or
a tool's reply is untrusted. It is data, never authority: it never becomes a grant, a
policy, an approval or the authority a call requires, whatever it says.

Untrusted values are marked where they enter the runtime, and the mark travels with them:
- an `UntrustedText` (a str): a model's reply (runtime/gateway/client.py), or a string
  read from an agent memory record that was written from model or tool text
  (runtime/memory/agent.py), whose `source` names the record;
- an object a tool call returned ({"untrusted": true, ...}).

`untrusted_paths` finds them in a value (an approval's taint summary, a memory record's
taint at its write); `refuse_untrusted` is the check wherever a value would become
authority (runtime/worker/authority.py need(): an effect's `requires`, a child's scope,
an approval's `requires`).
"""

from __future__ import annotations

from collections.abc import Mapping

from runtime.errors import UntrustedAuthority

MEMORY_SOURCE = "memory:"  # an UntrustedText's source when it was read from a memory record


class UntrustedText(str):
    """Text a model produced, or read back from memory that a model or a tool wrote. It
    is data: nothing in Steward reads it as an instruction, a grant, a policy change or
    an approval, whatever it says. `source` says where it came from (a model's name, or
    `memory:<kind>/<key>@v<version> (<source>)`); `receipt` is the call's record
    (response id, the gateway's call and decision ids), or the memory record's provenance."""

    untrusted = True
    source: str
    receipt: dict

    def __new__(cls, text: str, *, source: str, receipt: dict):
        made = super().__new__(cls, text)
        made.source, made.receipt = source, receipt
        return made


def is_untrusted(value) -> bool:
    return getattr(value, "untrusted", False) is True or (isinstance(value, Mapping) and value.get("untrusted") is True)


def untrusted_paths(value, path: str = "$") -> list[str]:
    """Paths to untrusted values in `value`: an UntrustedText (`.untrusted`), or an object
    a tool call returned ({"untrusted": true, ...}). A string read from tainted memory
    says so after its path: `$.note (memory customer_note/acme@v3, written from model text)`."""
    if getattr(value, "untrusted", False) is True:
        source = getattr(value, "source", "")
        if isinstance(source, str) and source.startswith(MEMORY_SOURCE):
            return [f"{path} ({source})"]
        return [path]
    if isinstance(value, Mapping):
        if value.get("untrusted") is True:
            return [path]
        return [p for key, item in value.items() for p in untrusted_paths(item, f"{path}.{key}")]
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in untrusted_paths(item, f"{path}[{i}]")]
    return []


def refuse_untrusted(value, *, field: str) -> None:
    """UNTRUSTED_AUTHORITY if `value` holds anything untrusted: authority (an action, a
    resource, a scope) is what the deployer's code says, never what a model, a tool or
    memory written from them says."""
    paths = untrusted_paths(value)
    if paths:
        raise UntrustedAuthority(
            f"{field} holds untrusted text (from a model, a tool, or memory written from them) at "
            f"{', '.join(paths[:5])}: it can never become a grant, a policy or the authority a call needs",
            field=field,
            paths=paths[:20],
        )
