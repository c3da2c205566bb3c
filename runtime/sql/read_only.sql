-- A dry replay (runtime/worker/replay.py) runs in a transaction that may write nothing:
-- whatever agent code tries between its steps fails, and the replay is refused.
SET TRANSACTION READ ONLY
