"""runtime/db.py: the hand-written statements are converted for PostgreSQL once per
process, not on every call (psycopg caches the conversion of `%(name)s` placeholders
only below a length bound, which db.py raises to cover them)."""

from __future__ import annotations

import re
from importlib import resources

import psycopg._queries
import pytest
from django.db import connection
from psycopg.adapt import Transformer

from runtime import db

pytestmark = pytest.mark.django_db

NAMES = sorted(p.name[:-4] for p in resources.files("runtime.sql").iterdir() if p.name.endswith(".sql"))


def longest() -> str:
    return max((db.sql(name) for name in NAMES), key=lambda text: len(text.encode()))


def test_every_statement_is_within_the_bound_that_keeps_its_conversion():
    assert len(longest().encode()) <= psycopg._queries.MAX_CACHED_STATEMENT_LENGTH


def test_the_longest_statement_is_converted_once_then_found_in_the_cache():
    text = longest()
    assert len(text.encode()) > 4096  # past psycopg's own bound: the case the raised bound is for
    connection.ensure_connection()
    query = psycopg._queries.PostgresQuery(Transformer(connection.connection))
    params = {name: None for name in re.findall(r"%\((\w+)\)s", text)}
    psycopg._queries._query2pg.cache_clear()
    for _ in range(3):
        query.convert(text, params)
    seen = psycopg._queries._query2pg.cache_info()
    assert (seen.misses, seen.hits) == (1, 2)
