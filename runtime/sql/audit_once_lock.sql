-- Serialize the writers of one "once per period" audit event (runtime/trail/services.py
-- audit_record_once): held until their transaction ends, so the next writer's look-up, a
-- statement of its own, sees the event the one before it committed. The two-key form keeps
-- it apart from the one-key advisory locks of the audit chains and the kill switch
-- (migrations 0007 and 0014) and from the spawn lock's class (spawn_lock.sql).
SELECT pg_advisory_xact_lock(hashtext('steward.audit_once'), hashtext(%(key)s::text))
