-- extends: approval_context
-- The re-check's read (runtime/approvals/request.py): the request's packages as they
-- stand, and the context their digest is recomputed from, in one round trip.
--
-- Read-only, and taken without the task's row lock. Only the attempt holding the task's
-- lease moves a decided package (approved to consumed or stale: a decision and the
-- expiry sweep both need `pending`), so once every package reads as decided nothing
-- changes them under this attempt, and approval_check.sql records the outcome, fenced.
-- A package that reads as pending races its decision: then the caller takes the task's
-- row lock and reads again in a new statement, whose snapshot comes after the lock, so a
-- decision either committed before it (and is seen) or waits for this attempt's commit
-- and finds the task blocked again (approval_decide.sql).
, package AS (
    SELECT a.id, a.state, a.decided_by, a.comment, a.stale_reason, a.action_hash, a.context_digest, a.context
    FROM steward_approval a
    WHERE a.id = ANY (%(ids)s::uuid[]) AND a.task_id = %(task)s
)
SELECT p.*, c.input_digest, c.authz_revision
FROM package p, context c
