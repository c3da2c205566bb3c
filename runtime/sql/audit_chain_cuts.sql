-- Chain names that cut the trail into ranges of about equal size, for verifying the
-- ranges at once (runtime/audit.py). From a sample of one page in a hundred: a cut only
-- balances the work, so an estimate will do; a small trail may sample nothing (NULL).
SELECT percentile_disc(%(fractions)s::float8[]) WITHIN GROUP (ORDER BY chain) AS cuts
FROM steward_audit TABLESAMPLE SYSTEM (1)
