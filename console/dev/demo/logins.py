"""The demo's people, in a module without Django: `make run` (console/dev/run.py) prints
them in its summary, and console/dev/demo/seed.py creates them (debug only, never in a
deploy). Each belongs to one tenant with one role; `admin` is a superuser for /admin/."""

# username -> (tenant, role, password)
DEMO_PEOPLE = {
    "alice": ("acme", "operator", "alice-demo"),
    "bob": ("acme", "viewer", "bob-demo"),
    "carol": ("globex", "operator", "carol-demo"),
    "dave": ("acme", "admin", "dave-demo"),  # manages acme's members (/members/)
}
DEMO_TENANTS = {"acme": "Acme Research", "globex": "Globex"}
DEMO_ADMIN = ("admin", "admin-demo")
