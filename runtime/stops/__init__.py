"""Stop for good (docs/contracts.md §3, docs/adr/0016-stops.md).

A stop request moves every live task of a tree (or of an agent, the kill switch) to
`stopping` in one transaction, and that commit closes their admission at every
boundary: storage (every attempt write is fenced on `status = 'running'`), the
scheduler (timers and queued work dropped; a late wake-up or claim finds nothing), the
credential gateway (a token of a task that is not running is denied) and the worker
(it sees the stop at its next step boundary, or is ended by force after a grace).

Each boundary then writes one acknowledgment per task (steward_stop_ack, services.
stop_ack); the boundaries that live in PostgreSQL acknowledge in the stop's own
transaction, because that transaction is their enforcement. A task becomes `cancelled`
once all four acknowledged and its children are cancelled (leaf first), or once its
bound passed (the supervisor's sweep): a stop never hangs, and its summary (selectors.
stop_summary) lists what never answered.
"""
