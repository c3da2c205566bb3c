"""Steward's durable core: tasks, attempts, the step journal, the effect ledger, pools,
leases, the supervisor and the audit trail. No HTTP and no templates live here, and
nothing here imports `console` (an import-linter contract in pyproject.toml holds it).
"""
