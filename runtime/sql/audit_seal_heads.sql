-- The chain heads a new seal of a tenant must name, and how far its scan of the trail
-- got: at most 2 × %(rows)s audit rows read, however many chains moved (issue 20: the
-- first seal after a burst read a million rows, sorted them on disk, and wrote 10 MB).
--
-- * settled: the next %(rows)s rows after the previous seal's position (%(after_at)s,
--   %(after_id)s) in (at, id) order, older than %(horizon)s. An event's `at` is its
--   transaction's start, and no transaction outlives the server-side bounds of a lease
--   (docs/adr/0012-bounded-stale-owners.md): every row older than the horizon, two leases
--   back, is committed or never will be, so a position behind it never needs re-reading.
-- * fresh: the first %(rows)s rows from the horizon on, so that what was just written is
--   sealed now and not a lease later. They are read again by the next seal (an event that
--   committed late is seen then) and, once settled, by the settled scan.
-- Both are ranges of audit_tenant_at. Of each chain read, its highest row is named
-- unless a seal already names that row or a later one (audit_seal_head_chain, one probe
-- per chain). The first row carries the settled scan's count and last position.
WITH settled AS (
    SELECT a.at, a.id, a.chain, a.chain_seq, a.hash
    FROM steward_audit a
    WHERE a.tenant = %(tenant)s AND (a.at, a.id) > (%(after_at)s, %(after_id)s) AND a.at < %(horizon)s
    ORDER BY a.at, a.id
    LIMIT %(rows)s
), fresh AS (
    SELECT a.chain, a.chain_seq, a.hash
    FROM steward_audit a
    WHERE a.tenant = %(tenant)s AND a.at >= %(horizon)s
    ORDER BY a.at, a.id
    LIMIT %(rows)s
), heads AS (
    SELECT DISTINCT ON (c.chain) c.chain, c.chain_seq, c.hash
    FROM (SELECT chain, chain_seq, hash FROM settled UNION ALL SELECT chain, chain_seq, hash FROM fresh) c
    ORDER BY c.chain, c.chain_seq DESC
), moved AS (
    SELECT h.chain, h.chain_seq, h.hash FROM heads h
    WHERE NOT EXISTS (SELECT 1 FROM steward_audit_seal_head s
                      WHERE s.tenant = %(tenant)s AND s.chain = h.chain AND s.chain_seq >= h.chain_seq)
), scanned AS (
    SELECT count(*) AS n FROM settled
), last AS (
    SELECT s.at, s.id FROM settled s ORDER BY s.at DESC, s.id DESC LIMIT 1
)
SELECT scanned.n, last.at, last.id, moved.chain, moved.chain_seq, moved.hash
FROM scanned LEFT JOIN last ON true LEFT JOIN moved ON true
