-- The database's clock, the one every stored time comes from: now, and %(seconds)s from
-- now. For ctx.now() and durable timers (runtime/attempts/timers.py): inside a sleep's
-- transaction now() is that transaction's start, the same instant the attempt's end
-- stamps, so the wake time and the "is it due" test read one clock.
SELECT extract(epoch FROM now())::float8 AS now,
       extract(epoch FROM now() + make_interval(secs => %(seconds)s::float8))::float8 AS later
