"""Human review (docs/contracts.md, "Human review"; docs/adr/0017-approvals.md).

`ctx.request_approval()` (request.py) persists an approval package and ends the
attempt `await`: the task is `blocked` with `blocked_reason = approval_pending`, holding
no worker, no lease and no slot. A person decides it once (services.approval_decide),
or it expires (services.approvals_expire_due, from the supervisor's sweep); either moves
the task back to `queued`. The next attempt replays up to the request and, for an
approval, recomputes the action's hash and the context digest and re-checks authority
before the agent may act on it (request.verify): a change makes the package `stale`.
"""
