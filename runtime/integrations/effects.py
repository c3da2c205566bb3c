"""What a framework integration's `effects=` mapping may say of a tool (StewardAgent's and
StewardRunner's alike): the tool runs through the effect ledger with these options
(runtime/effects/ledger.py), so a crash repeats at most the call that was running."""

from __future__ import annotations

OPTIONS = frozenset({"effect_class", "key", "keyed", "requires"})


def effect_options(tool: str, spec: dict) -> dict:
    """`spec` checked at registration, loudly: a misspelt option would otherwise leave a
    write running as a plain step, which a crash may repeat."""
    unknown = set(spec) - OPTIONS
    if unknown or "effect_class" not in spec:
        raise ValueError(
            f"effects[{tool!r}] takes effect_class (required), key, keyed and requires; got {sorted(spec)}"
        )
    return dict(spec)
