"""What token budgets cost the credential gateway's two statements (runnable alone as
`python -m tests.bench_budgets`): one JSON object on stdout, progress on stderr.

    admit_ms_p50_unbudgeted    gateway_admit (decision + call row, one statement) for a
                               task two levels deep whose tenant has no budget
    admit_ms_p50_budgeted      the same with task, tree and tenant budgets set and usage
                               kept in every shard (the three sums run)
    finish_ms_p50_no_tokens    gateway_finish of a call with no tokens (a tool call)
    finish_ms_p50_tokens       gateway_finish of a model call: three usage upserts more

Alternating pairs on one connection, in its own database (STEWARD_BENCH_BUDGETS_DB,
default steward_bench_budgets), made anew.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("STEWARD_BENCH_GATEWAY_DB", os.environ.get("STEWARD_BENCH_BUDGETS_DB", "steward_bench_budgets"))

from tests.bench import use_bench_database
from tests.bench_gateway import BENCH_DB, capability_pem

ROUNDS = 1500


def log(message: str) -> None:
    print(f"bench-budgets: {message}", file=sys.stderr, flush=True)


def main() -> dict:
    url = use_bench_database(BENCH_DB)
    os.environ.update(DATABASE_URL=url, STEWARD_CAPABILITY_KEY=capability_pem(), STEWARD_LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    # Its tasks are t.steps: outside pytest, STEWARD_AGENT_MODULES may name only the demo's agents.
    import tests.agents  # noqa: F401
    from runtime.authz.services import grant_create
    from runtime.authz.tokens import token_mint, token_verify
    from runtime.gateway.services import MODEL_ACTION, MODEL_ROUTE, gateway_admit, gateway_finish
    from runtime.limits.services import budget_set
    from runtime.models import Task, TokenUsage
    from runtime.tasks.services import insert_task, task_submit

    call_command("migrate", verbosity=0)

    def tree(tenant: str):
        root = task_submit(agent="t.steps", input={}, tenant=tenant, owner="user:alice", actor="user:alice").task_id
        pool = Task.objects.get(id=root).pool_id
        kid = insert_task(
            agent="t.steps",
            input_text="{}",
            digest=f"{tenant}-1",
            tenant=tenant,
            owner="user:alice",
            pool=pool,
            actor=f"task:{root}",
            parent_id=root,
            root_id=root,
            spawn_seq=1,
        ).task_id
        leaf = insert_task(
            agent="t.steps",
            input_text="{}",
            digest=f"{tenant}-2",
            tenant=tenant,
            owner="user:alice",
            pool=pool,
            actor=f"task:{kid}",
            parent_id=kid,
            root_id=root,
            spawn_seq=1,
        ).task_id
        Task.objects.filter(id=leaf).update(status="running")
        for principal in ("agent:t.steps", "user:alice"):
            grant_create(tenant=tenant, principal=principal, action="model.call", resource="model:*", actor="user:dave")
        return root, leaf

    plain_root, plain = tree("plain")
    budgeted_root, budgeted = tree("budgeted")
    budget_set(tenant="budgeted", actor="user:dave", task_tokens=10**14, tree_tokens=10**14, tenant_tokens=10**14)
    TokenUsage.objects.bulk_create(
        TokenUsage(tenant="budgeted", scope=scope, subject=subject, shard=shard, tokens=1000, calls=1)
        for shard in range(8)
        for scope, subject in (("task", str(budgeted)), ("tree", str(budgeted_root)), ("tenant", "budgeted"))
    )

    claims = {
        t: token_verify(token_mint(task=t, audience=MODEL_ROUTE), audience=MODEL_ROUTE) for t in (plain, budgeted)
    }
    timings: dict[str, list[float]] = {k: [] for k in ("admit_plain", "admit_budgeted", "finish_none", "finish_tokens")}
    log(f"{ROUNDS} rounds")
    for i in range(ROUNDS + 100):
        for task, admit_key, finish_key, tokens in (
            (plain, "admit_plain", "finish_none", 0),
            (budgeted, "admit_budgeted", "finish_tokens", 42),
        ):
            started = time.perf_counter()
            admission = gateway_admit(
                claims=claims[task],
                route=MODEL_ROUTE,
                action=MODEL_ACTION,
                resource="model:fake-1",
                idempotency_key=f"k-{i}",
            )
            admitted = time.perf_counter()
            assert admission.admitted, admission.decision.reason_code
            gateway_finish(admission, outcome="committed", status=200, receipt={"status": 200}, tokens=tokens)
            finished = time.perf_counter()
            if i >= 100:  # warm-up: prepared statements, caches
                timings[admit_key].append((admitted - started) * 1000)
                timings[finish_key].append((finished - admitted) * 1000)
    p50 = {k: round(statistics.median(v), 3) for k, v in timings.items()}
    return {
        "admit_ms_p50_unbudgeted": p50["admit_plain"],
        "admit_ms_p50_budgeted": p50["admit_budgeted"],
        "finish_ms_p50_no_tokens": p50["finish_none"],
        "finish_ms_p50_tokens": p50["finish_tokens"],
    }


if __name__ == "__main__":
    print(json.dumps(main()))
