"""The demo's login, in a module without Django: `make run` (console/dev/run.py) prints it
in its summary, and console/dev/demo/seed.py creates it (debug only)."""

DEMO_OPERATOR = ("alice", "steward-demo")  # (username, password): a superuser, for the admin
