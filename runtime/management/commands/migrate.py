"""`manage.py migrate`: Django's, connected as the schema's owner when
STEWARD_MIGRATE_DATABASE_URL names one, and then the application role's privileges.

Every run ends by giving each application role exactly its profile on every table,
sequence and routine (runtime/roles.py), in one transaction: a table a migration of this
run created is usable by the application the moment the command returns, and nothing is
granted by default to whatever the owner creates later (docs/adr/0022-database-roles.md).
pytest-django builds its test databases through this command too.
"""

from __future__ import annotations

from django.core.management.commands import migrate
from django.db import connections, transaction

from runtime import config, roles


class Command(migrate.Command):
    help = migrate.Command.help + " Then grant the application role(s) their privileges (runtime/roles.py)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(database=config.migrate_database())

    def handle(self, *args, **options):
        super().handle(*args, **options)
        if options["plan"] or options["check_unapplied"]:
            return  # nothing was applied
        alias = options["database"]
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            granted = roles.privileges_grant(cursor, config.database_roles())
        if granted and options["verbosity"] >= 1:
            self.stdout.write(f"Granted the application's privileges to {', '.join(granted)}")
