"""List pages (runtime/paging.py, runtime/tasks/selectors.py): newest first from an index, with
an opaque cursor. A walk over the pages returns every row once, in order, while new rows
arrive; each filter returns what it says; a page reads about `limit` rows from its
index however large the table; and a cursor only works where it came from.
"""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runtime import paging, states
from runtime.effects.selectors import effect_page
from runtime.errors import InvalidInput, TaskNotFound
from runtime.ids import epoch_ms
from runtime.limits.selectors import pool_usage
from runtime.models import AuditEvent, Effect, Pool, Task
from runtime.stops.services import task_stop
from runtime.tasks.selectors import task_page
from runtime.tasks.services import task_submit
from runtime.trail.selectors import audit_page
from tests.plans import explain, rows_read
from tests.pools import pool_with

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
CAROL = {"tenant": "globex", "owner": "user:carol", "actor": "user:carol"}


def submit(agent: str = "t.steps", who: dict = ALICE, **input):
    return task_submit(agent=agent, input=input, **who).task_id


def walk(select, **filters) -> list:
    """Every item of every page, following the cursors to the end."""
    items, after, pages = [], None, 0
    while True:
        page = select(after=after, **filters)
        items += page.items
        pages += 1
        assert pages < 1000, "the cursors never ended"
        if page.next is None:
            return items
        after = page.next


def load_tasks(
    n: int,
    *,
    tenants=("acme",),
    statuses=("completed",),
    agent: str = "t.steps",
    pool: str = "default",
    spread: timedelta = timedelta(hours=1),
) -> None:
    """`n` tasks written set-wise, created evenly over `spread` up to now, with ids minted
    the way steward_submit mints them; consecutive tasks cycle through the tenants and
    the statuses, so each combination is spread over the whole table."""
    if not Pool.objects.filter(name=pool).exists():
        pool_with(pool, max_running=50, max_queued=10_000)
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                                      next_reason, crash_count, status_note, created_at, updated_at, queued_at,
                                      finished_at)
            SELECT steward_uuid7(at), %(agent)s, '{}', md5(g::text), tenant, 'user:x', %(pool)s, status, 1,
                   'first', 0, '', at, at, at, CASE WHEN status IN ('completed', 'failed', 'cancelled') THEN at END
            FROM generate_series(1, %(n)s) g,
                 LATERAL (SELECT now() - %(spread)s * (1 - g::float8 / %(n)s),
                                 (%(tenants)s::text[])[1 + g %% cardinality(%(tenants)s::text[])],
                                 (%(statuses)s::text[])[1 + (g / cardinality(%(tenants)s::text[]))
                                                        %% cardinality(%(statuses)s::text[])]) AS t(at, tenant, status)
            """,
            {
                "n": n,
                "tenants": list(tenants),
                "statuses": list(statuses),
                "agent": agent,
                "pool": pool,
                "spread": spread,
            },
        )
        cur.execute("ANALYZE steward_task")


# --- ids ------------------------------------------------------------------------------------


def test_task_ids_are_time_ordered_and_carry_their_creation_millisecond(live):
    ids = [submit(i=i) for i in range(30)]  # each in its own transaction: its own now()

    created = dict(Task.objects.filter(id__in=ids).values_list("id", "created_at"))
    assert all(task_id.version == 7 for task_id in ids)
    # Minted from the same clock reading as created_at, rounded down to the millisecond...
    assert all(task_id.int >> 80 == epoch_ms(created[task_id]) for task_id in ids)
    # ...so id order is creation order, to the millisecond (within one, ids are random).
    in_id_order = [epoch_ms(created[task_id]) for task_id in sorted(ids)]
    assert in_id_order == sorted(in_id_order) and len(set(in_id_order)) > 1


# --- walking pages --------------------------------------------------------------------------


def test_a_walk_over_the_pages_returns_every_task_once_newest_first_while_new_tasks_arrive(db):
    before = [submit(i=i) for i in range(23)]
    seen, after, arrived = [], None, []
    while True:
        page = task_page(tenant="acme", limit=5, after=after)
        seen += [t.id for t in page]
        arrived.append(submit(late=True))
        if page.next is None:
            break
        after = page.next

    # Every task that existed when the walk began, exactly once, newest first. A task that
    # arrived meanwhile may be seen or not: one minted in the cursor's millisecond can
    # sort behind it (here every id shares one: the test runs in one transaction).
    assert [task_id for task_id in seen if task_id in before] == sorted(before, reverse=True)
    assert len(seen) == len(set(seen))
    assert set(seen) - set(before) <= set(arrived)


def test_each_task_filter_returns_exactly_its_tasks(db):
    pool_with("batch", max_running=1, max_queued=100)
    plain = [submit(i=i) for i in range(4)]
    other_agent = [submit("t.child", value=i) for i in range(3)]
    in_batch = [task_submit(agent="t.steps", input={"b": i}, pool="batch", **ALICE).task_id for i in range(2)]
    carols = [submit(who=CAROL, i=i) for i in range(3)]
    task_stop(task_id=plain[0], actor="user:alice", reason="test")
    task_stop(task_id=carols[0], actor="user:carol", reason="test")
    everything = plain + other_agent + in_batch + carols

    def ids(**filters):
        found = [t.id for t in walk(task_page, limit=2, **filters)]
        assert found == sorted(found, reverse=True), "newest first"
        return set(found)

    assert ids() == set(everything)
    assert ids(tenant="acme") == set(plain + other_agent + in_batch)
    assert ids(status=states.CANCELLED) == {plain[0], carols[0]}
    assert ids(tenant="acme", status=states.QUEUED) == set(plain[1:] + other_agent + in_batch)
    assert ids(tenant="acme", agent="t.child") == set(other_agent)
    assert ids(pool="batch") == set(in_batch)
    assert ids(tenant="globex", status=states.QUEUED, agent="t.steps") == set(carols[1:])


def test_a_created_range_is_exact_at_the_microsecond(live):
    ids = [submit(i=i) for i in range(6)]  # each in its own transaction: its own created_at
    created = {t.id: t.created_at for t in Task.objects.filter(id__in=ids)}
    cut_from, cut_to = created[ids[1]], created[ids[4]]

    found = walk(task_page, tenant="acme", created_after=cut_from, created_before=cut_to, limit=2)

    assert [t.id for t in found] == sorted(ids[1:4], reverse=True)  # from inclusive, to exclusive
    later = walk(task_page, created_after=cut_to + timedelta(microseconds=1), limit=2)
    assert [t.id for t in later] == [ids[5]]


def test_children_and_trees_page_by_their_own_indexes(db):
    root = submit()
    kids = [task_submit(agent="t.child", input={"value": i}, **ALICE) for i in range(3)]
    # Lineage as ctx.spawn writes it: parent, root and the spawning step's seq.
    Task.objects.filter(id=kids[0].task_id).update(parent_id=root, root_id=root, spawn_seq=0)
    Task.objects.filter(id=kids[1].task_id).update(parent_id=root, root_id=root, spawn_seq=1)
    Task.objects.filter(id=kids[2].task_id).update(parent_id=kids[1].task_id, root_id=root, spawn_seq=0)

    children = walk(task_page, parent=root, limit=1)
    tree = walk(task_page, root=root, limit=2)

    assert [t.id for t in children] == [kids[1].task_id, kids[0].task_id]  # latest spawn first
    assert [t.id for t in tree] == sorted((k.task_id for k in kids), reverse=True)  # below the root


# --- residual filters ---------------------------------------------------------------------------


def test_a_rare_residual_filter_gives_short_pages_that_still_find_every_match(db, monkeypatch):
    monkeypatch.setattr(paging, "SCAN_BUDGET", 10)
    load_tasks(95)
    rare = [submit("t.child", value=i) for i in range(3)]
    load_tasks(40, statuses=("queued",))

    pages, found, after = [], [], None
    while True:
        page = task_page(tenant="acme", agent="t.child", limit=2, after=after)
        pages.append(len(page))
        found += [t.id for t in page]
        if page.next is None:
            break
        after = page.next

    assert found == sorted(rare, reverse=True)
    assert all(n <= 2 for n in pages) and 0 in pages  # bounded walks: some pages come back empty
    assert len(pages) <= 140 // 10 + 3


# --- cost: a page reads about `limit` rows, however large the table ---------------------------


HALF_AN_HOUR_AGO = timezone.now() - timedelta(minutes=30)  # one value, so the filters stay the same

# (what, the page, the table it reads). In the data below acme holds a tenth of the tasks
# and `failed` a fifth of each tenant's: a page whose cost grew with its depth would read
# thousands of rows ten pages down.
DEEP_PAGES = [
    ("all tasks", lambda after: task_page(limit=10, after=after), "steward_task"),
    ("a tenant's", lambda after: task_page(tenant="acme", limit=10, after=after), "steward_task"),
    ("by status", lambda after: task_page(status="failed", limit=10, after=after), "steward_task"),
    (
        "a tenant's by status",
        lambda after: task_page(tenant="acme", status="failed", limit=10, after=after),
        "steward_task",
    ),
    (
        "a tenant's since",
        lambda after: task_page(tenant="acme", created_after=HALF_AN_HOUR_AGO, limit=10, after=after),
        "steward_task",
    ),
    ("all effects", lambda after: effect_page(limit=10, after=after), "steward_effect"),
    ("effects by state", lambda after: effect_page(state="unknown", limit=10, after=after), "steward_effect"),
    ("a tenant's audit", lambda after: audit_page(tenant="acme", limit=10, after=after), "steward_audit"),
    (
        "a tenant's audit since",
        lambda after: audit_page(tenant="acme", since=HALF_AN_HOUR_AGO, limit=10, after=after),
        "steward_audit",
    ),
]


def executed(select) -> list[str]:
    """The SQL the selector ran, for EXPLAIN."""
    with CaptureQueriesContext(connection) as queries:
        select()
    return [q["sql"] for q in queries.captured_queries]


def test_a_page_thirty_pages_down_reads_as_few_rows_as_the_first(db):
    load_tasks(16_000, tenants=("acme",) + ("globex",) * 9, statuses=("failed",) + ("completed",) * 4)
    with connection.cursor() as cur:  # an attempt, an effect and an audit row per task, set-wise
        cur.execute("""
            INSERT INTO steward_attempt (task_id, epoch, worker, reason, started_at, heartbeat_at,
                                         lease_expires_at, ended_at, end_reason)
            SELECT id, 1, 'w', 'first', created_at, created_at, created_at, created_at, 'complete'
            FROM steward_task""")
        cur.execute("""
            INSERT INTO steward_effect (key, task_id, tenant, step_seq, name, effect_class, keyed, state,
                                        request_digest, attempt_id, epoch, sends, resend_approved, created_at,
                                        resolved_by, resolution_note)
            SELECT t.id || '/0/send', t.id, t.tenant, 0, 'send', 'reversible', true,
                   CASE WHEN t.status = 'failed' THEN 'unknown' ELSE 'committed' END, 'd', a.id, 1, 1, false,
                   t.created_at, '', ''
            FROM steward_task t JOIN steward_attempt a ON a.task_id = t.id ORDER BY t.id""")
        # Unlinked rows, each its chain's first, at its task's creation: the link trigger
        # would take an advisory lock per chain, and 16,000 in one transaction would
        # exhaust the server's shared lock table (every session on it would feel that).
        cur.execute("ALTER TABLE steward_audit DISABLE TRIGGER steward_audit_link")
        cur.execute("""
            INSERT INTO steward_audit (chain, chain_seq, at, actor, tenant, task_id, kind, data, prev_hash, hash)
            SELECT 'task:' || id, 1, created_at, 'user:x', tenant, id, 'task.submitted', '{}', '', ''
            FROM steward_task ORDER BY id""")
        cur.execute("ALTER TABLE steward_audit ENABLE TRIGGER steward_audit_link")
        cur.execute("ANALYZE")

    def read(select, after) -> int:
        return sum(rows_read(explain(sql), table) for sql in executed(lambda: select(after)))

    for what, select, table in DEEP_PAGES:  # noqa: B007 - read() uses `table`
        page = select(None)
        for _ in range(30):
            page = select(page.next)
        assert len(page) == 10 and page.next is not None, what
        top, deep = read(select, None), read(select, page.next)
        # The planner may walk the primary key and filter when the rows it would throw
        # away are few per row kept (acme's tenth of the tasks: ten to one), rather than
        # fetch scattered rows through acme's own index. Either way a page reads a small
        # multiple of its 11 rows, on top and 30 pages down alike; a walk that started
        # from the top of even the right index would read 300 rows or more down there.
        assert top <= 150 and deep <= 150, (what, top, deep)


# --- cursors ------------------------------------------------------------------------------------


def test_a_cursor_is_refused_with_other_filters_on_another_list_or_when_mangled(db):
    for i in range(3):
        submit(i=i)
    cursor = task_page(tenant="acme", limit=1).next
    assert task_page(tenant="acme", limit=1, after=cursor).items  # fine where it came from

    for misuse in (
        lambda: task_page(tenant="globex", limit=1, after=cursor),
        lambda: task_page(limit=1, after=cursor),
        lambda: effect_page(limit=1, after=cursor),
        lambda: task_page(tenant="acme", limit=1, after=cursor[:-3]),
        lambda: task_page(tenant="acme", limit=1, after="not a cursor"),
    ):
        with pytest.raises(InvalidInput) as refused:
            misuse()
        assert refused.value.details == {"field": "after"}


@pytest.mark.parametrize("limit", [0, -1, paging.MAX_LIMIT + 1, "5", True])
def test_a_limit_out_of_range_is_refused(db, limit):
    with pytest.raises(InvalidInput):
        task_page(limit=limit)


def test_malformed_filters_are_refused_and_an_unknown_task_is_not_found(db):
    with pytest.raises(InvalidInput):
        task_page(status="nosuch")
    with pytest.raises(InvalidInput):
        task_page(parent="not-a-uuid")
    with pytest.raises(InvalidInput):
        effect_page(state="nosuch")
    with pytest.raises(InvalidInput):
        audit_page(tenant="")
    with pytest.raises(TaskNotFound):
        effect_page(task=uuid.uuid4())


# --- effects, audit, pools ------------------------------------------------------------------------


def test_effect_pages_filter_by_task_state_and_class(db):
    tasks = [submit(i=i) for i in range(3)]
    now = timezone.now()
    from runtime.models import Attempt

    for _n, task_id in enumerate(tasks):
        attempt = Attempt.objects.create(
            task_id=task_id, epoch=1, worker="w", reason="first", started_at=now, heartbeat_at=now, lease_expires_at=now
        )
        for seq, (state, cls) in enumerate([("committed", "reversible"), ("unknown", "irreversible")]):
            Effect.objects.create(
                key=f"{task_id}/{seq}/e",
                task_id=task_id,
                step_seq=seq,
                name="e",
                effect_class=cls,
                keyed=True,
                state=state,
                request_digest="d",
                attempt=attempt,
                epoch=1,
                sends=1,
            )
    every = list(Effect.objects.order_by("-id").values_list("id", flat=True))

    assert [e.id for e in walk(effect_page, limit=4)] == every
    assert {e.state for e in walk(effect_page, state="unknown", limit=1)} == {"unknown"}
    assert len(walk(effect_page, state="unknown", limit=1)) == 3
    assert [e.step_seq for e in walk(effect_page, task=tasks[1], limit=1)] == [1, 0]
    assert [
        (e.task_id, e.effect_class) for e in walk(effect_page, task=tasks[2], effect_class="reversible", limit=1)
    ] == [(tasks[2], "reversible")]


def test_audit_pages_filter_by_task_actor_kind_and_time(live):  # each act its own transaction: its own `at`
    first = submit()
    task_stop(task_id=first, actor="user:bob", reason="test")
    carols = submit(who=CAROL)
    second = submit()
    rows = list(AuditEvent.objects.filter(tenant="acme").order_by("-at", "-id"))

    assert [a.id for a in walk(audit_page, tenant="acme", limit=1)] == [a.id for a in rows]
    assert [a.kind for a in walk(audit_page, tenant="acme", task=first, limit=1)] == [
        "task.cancelled",
        "task.stopping",
        "task.submitted",
    ]
    assert [a.task_id for a in walk(audit_page, tenant="acme", actor="user:bob", limit=5)] == [first, first]
    assert {a.task_id for a in walk(audit_page, tenant="acme", kind="task.submitted", limit=1)} == {first, second}
    assert carols not in {a.task_id for a in walk(audit_page, tenant="acme", limit=10)}
    cancelled_at = AuditEvent.objects.get(kind="task.cancelled").at
    assert [
        a.task_id for a in walk(audit_page, tenant="acme", since=cancelled_at + timedelta(microseconds=1), limit=1)
    ] == [second]
    assert [a.kind for a in walk(audit_page, tenant="acme", until=cancelled_at, limit=1)] == ["task.submitted"]


def test_pools_page_by_name(db):
    for name in ("a-pool", "b-pool", "c-pool"):
        pool_with(name, max_running=1, max_queued=1)

    names = [u.pool.name for u in walk(pool_usage, limit=1)]

    assert names == sorted(names) and {"a-pool", "b-pool", "c-pool"} <= set(names)


# --- the CLI ------------------------------------------------------------------------------------


def steward(*args: str) -> str:
    out = io.StringIO()
    call_command("steward", "--actor", "user:alice", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_cli_prints_the_next_cursor_and_pages_on_with_after(db):
    ids = [submit(i=i) for i in range(3)]

    first = steward("tasks", "--limit", "2")
    *table, last = first.splitlines()
    assert last.startswith("next: ")
    second = steward("tasks", "--limit", "2", "--after", last.removeprefix("next: "))

    listed = [line.split()[0] for line in table[2:]] + [line.split()[0] for line in second.splitlines()[2:]]
    assert listed == [str(i) for i in sorted(ids, reverse=True)]
    assert "next:" not in second
    with pytest.raises(CommandError) as refused:
        steward("tasks", "--after", "garbage")
    assert refused.value.returncode == 2 and str(refused.value).startswith("INVALID_INPUT: ")
