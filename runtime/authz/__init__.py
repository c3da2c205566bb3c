"""Authority: grants, the per-tenant authz_revision, decisions and capability tokens
(mint and verify; no HTTP). docs/adr/0013-authority-and-capability-tokens.md says why a
task's authority is the intersection of current rows, read again on every check.

The web side reaches this package through `services` and `selectors` only.
"""

# The rules in force, recorded in every decision. Change it whenever what authorize()
# allows for the same rows changes (a new reason, a new kind of pattern, a new source of
# authority), so a decision can always be read against the rules that made it.
POLICY_VERSION = "2026-12-01.1"

# The boundary at which the executor checks an effect's authority (ctx.effect(...,
# requires=...), ctx.authorize), on current rows, before the effect's intent is written
# or an interrupted effect is re-sent. Named `worker` in the contracts' vocabulary
# (docs/contracts.md, Vocabulary): the worker is where agent code runs.
EXECUTOR_BOUNDARY = "worker"
