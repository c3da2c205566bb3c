-- This transaction commits without waiting for its WAL flush (a crash of PostgreSQL may
-- lose it; a later transaction never sees it half-applied). Only for writes another
-- durable record already covers: runtime/gateway/services.py says which.
SELECT set_config('synchronous_commit', 'off', true)
