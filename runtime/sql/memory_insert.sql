-- One new version of an agent memory record, conditional on the version the writer read
-- (a compare-and-set that reports whether it won: a row back, or none).
-- %(expected)s is that version, 0 when the writer found no record. The row goes in as
-- expected + 1 only if version `expected` is there (for 0: no version is), so a writer
-- holding a stale read inserts nothing. Two writers that read the same version race on
-- the unique (tenant, agent, kind, key, version) index: ON CONFLICT DO NOTHING makes
-- the second wait for the first's commit and then insert nothing. Versions stay dense.
-- Times are the database's clock (the harness's controllable one in tests).
INSERT INTO steward_memory_record (tenant, agent, kind, key, version, schema_version, payload, payload_hash,
                                   change, source, untrusted, task_id, epoch, seq, actor, from_version, reason,
                                   valid_from, valid_until, created_at)
SELECT %(tenant)s::text, %(agent)s::text, %(kind)s::text, %(key)s::text, %(expected)s::integer + 1,
       %(schema_version)s::integer, %(payload)s::jsonb, %(payload_hash)s::text, %(change)s::text,
       %(source)s::text, %(untrusted)s::boolean, %(task)s::uuid, %(epoch)s::integer, %(seq)s::integer,
       %(actor)s::text, %(from_version)s::integer, %(reason)s::text,
       coalesce(%(valid_from)s::timestamptz, now()),
       coalesce(%(valid_until)s::timestamptz, now() + make_interval(secs => %(ttl)s::float8)),
       now()
WHERE CASE WHEN %(expected)s::integer = 0
           THEN NOT EXISTS (SELECT 1 FROM steward_memory_record m
                            WHERE m.tenant = %(tenant)s::text AND m.agent = %(agent)s::text AND m.kind = %(kind)s::text
                              AND m.key = %(key)s::text)
           ELSE EXISTS (SELECT 1 FROM steward_memory_record m
                        WHERE m.tenant = %(tenant)s::text AND m.agent = %(agent)s::text AND m.kind = %(kind)s::text
                          AND m.key = %(key)s::text AND m.version = %(expected)s::integer)
      END
ON CONFLICT (tenant, agent, kind, key, version) DO NOTHING
RETURNING id, version
