"""The supervisor's re-dispatch probe (runtime/sql/stale_queued.sql) finds the pools
whose queued work waited too long for a free slot, and its cost follows the number of
pools, not the size of their queues: it reads each pool's oldest queued task, never
the backlog."""

from __future__ import annotations

from django.db import connection

from runtime.db import fetchall, sql
from runtime.models import Slot, Task
from runtime.tasks.services import task_submit
from tests.plans import explain, rows_read
from tests.pools import pool_with

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
AGE = 60.0


def queue(pool: str, n: int, *, waited: float) -> None:
    """`n` queued tasks in `pool`, the oldest queued `waited` seconds ago."""
    ids = [task_submit(agent="t.steps", input={"i": i}, pool=pool, **ALICE).task_id for i in range(n)]
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE steward_task SET queued_at = now() - make_interval(secs => %s) + "
            "make_interval(secs => %s * ordinality) FROM unnest(%s::uuid[]) WITH ORDINALITY AS q(id) "
            "WHERE steward_task.id = q.id",
            [waited, 0.001, ids],
        )


def stale() -> set[str]:
    return {pool for (pool,) in fetchall("stale_queued", {"age": AGE})}


def test_it_names_pools_whose_oldest_queued_task_waited_too_long_with_a_slot_free(db):
    for pool in ("waited", "full", "fresh", "idle"):
        pool_with(pool, max_running=1, max_queued=10)
    queue("waited", 3, waited=AGE * 2)
    queue("full", 3, waited=AGE * 2)
    queue("fresh", 3, waited=AGE / 2)
    # `full`'s only slot is held: its queue waits for a worker to finish, not for a wake-up.
    holder = Task.objects.filter(pool="full").order_by("queued_at").first()
    Slot.objects.filter(pool="full").update(task=holder, epoch=1)

    assert stale() == {"waited"}


def test_its_cost_follows_the_pools_not_the_backlog(db):
    pool_with("deep", max_running=2, max_queued=5000)
    pool_with("shallow", max_running=2, max_queued=5000)
    with connection.cursor() as cur:  # a deep backlog, written set-wise
        cur.execute("""
            INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                                      next_reason, crash_count, status_note, created_at, updated_at, queued_at)
            SELECT gen_random_uuid(), 't.steps', '{}', md5(g::text), 'acme', 'user:alice', 'deep', 'queued', 0,
                   'first', 0, '', now(), now(), now() - interval '1 hour' + g * interval '1 ms'
            FROM generate_series(1, 3000) g""")
        cur.execute("ANALYZE steward_task")
    queue("shallow", 1, waited=AGE * 2)

    plan = explain(sql("stale_queued"), {"age": AGE})

    assert stale() == {"deep", "shallow"}
    # One row per pool from steward_task (its oldest queued task), not 3,001.
    assert rows_read(plan, "steward_task") <= 2, plan
