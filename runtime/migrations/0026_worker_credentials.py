"""Worker credentials, and the credential each attempt was claimed under (issue 21:
tokens minted outside agent reach, docs/adr/0034-token-minting.md). A worker no longer
holds the signing key: it asks the web side's minting service (/gateway/tokens) for an
attempt's token with its own credential, and the service gives it only for an attempt
that credential's worker holds. Frozen: the SQL is Django's (`sqlmigrate` prints it):

    CREATE TABLE "steward_worker_credential" ("id" varchar(16) NOT NULL PRIMARY KEY,
        "name" varchar(100) NOT NULL, "secret_hash" varchar(64) NOT NULL,
        "created_at" timestamp with time zone DEFAULT (STATEMENT_TIMESTAMP()) NOT NULL,
        "created_by" varchar(200) NOT NULL, "revoked_at" timestamp with time zone NULL,
        "revoked_by" varchar(200) NOT NULL, "last_used_at" timestamp with time zone NULL,
        "uses" bigint DEFAULT 0 NOT NULL);
    ALTER TABLE "steward_attempt" ADD COLUMN "credential" varchar(16) NULL;
    CREATE INDEX "steward_worker_credential_id_776720f5_like" ON "steward_worker_credential"
        ("id" varchar_pattern_ops);

A nullable column without a default: adding it rewrites nothing. Attempts claimed before
it, or by a worker without a credential, have none, and get no token from the service.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0025_gateway_unkeyed_calls"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerCredential",
            fields=[
                ("id", models.CharField(max_length=16, primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=100)),
                ("secret_hash", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("created_by", models.CharField(max_length=200)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_by", models.CharField(blank=True, default="", max_length=200)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("uses", models.BigIntegerField(db_default=0)),
            ],
            options={
                "db_table": "steward_worker_credential",
            },
        ),
        migrations.AddField(
            model_name="attempt",
            name="credential",
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
    ]
