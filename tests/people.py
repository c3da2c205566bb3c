"""The personas (docs: tests name them): alice operates tenant acme, bob views acme, carol
operates globex, dave administers acme. Each has a password and, on request, API tokens."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from console.models import ADMIN, OPERATOR, VIEWER, Membership, Tenant

PASSWORD = "correct horse battery staple"
PEOPLE = {"alice": ("acme", OPERATOR), "bob": ("acme", VIEWER), "carol": ("globex", OPERATOR), "dave": ("acme", ADMIN)}
TENANTS = {"acme": "Acme Research", "globex": "Globex"}


@dataclass(frozen=True)
class People:
    alice: object
    bob: object
    carol: object
    dave: object


def make_people() -> People:
    """Create the tenants, the people and their memberships (idempotent)."""
    for slug, name in TENANTS.items():
        Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    users = {}
    for username, (tenant, role) in PEOPLE.items():
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD)
        Membership.objects.update_or_create(user=user, tenant_id=tenant, defaults={"role": role})
        users[username] = user
    return People(**users)
