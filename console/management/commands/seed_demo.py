"""`manage.py seed_demo`: the demo's people, pools and tasks (console/dev/demo/seed.py).

Only with STEWARD_DEBUG on and the demo agents registered (STEWARD_AGENT_MODULES names
console.dev.demo.agents), as `make run` sets them: a deploy never seeds demo logins.
Idempotent: running it again keeps what exists, and never makes again what a person
changed or removed since. It acts as the seed (`system:seed`), never as a person.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.dev.demo.seed import seed_demo


class Command(BaseCommand):
    help = "Seed the demo (debug only), as system:seed: keeps whatever exists, and what a person changed."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("the demo is seeded only with STEWARD_DEBUG=1 (`make run` sets it)", returncode=2)
        for line in seed_demo():
            self.stdout.write(line)
