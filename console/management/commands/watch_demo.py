"""`manage.py watch_demo`: print a line as each seeded demo task finishes or needs an
operator (console/dev/demo/watch.py); exit once all have finished. `make run` starts it
after its summary, so these lines are what follows the summary."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from console.dev.demo.watch import DemoWatch


class Command(BaseCommand):
    help = "Print a line as each seeded demo task finishes or is blocked; exit when all have finished."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between looks (default 1)")

    def handle(self, *args, interval, **options):
        watch = DemoWatch()
        while True:
            for line in watch.poll():
                self.stdout.write(line)
            self.stdout.flush()
            if watch.done:
                return
            time.sleep(max(interval, 0.1))  # two task reads a second: nothing to wake us sooner
