"""Steward's Django admin site: Django's own, with its sign-in throttled like the console's
and its one object look-up that no ModelAdmin makes (the "view on site" redirect) scoped
like theirs. console/admin.py registers the models and scopes each one's rows.

INSTALLED_APPS names `AdminConfig` in place of django.contrib.admin, so `admin.site` is a
StewardAdminSite everywhere (the way Django's documentation overrides the default site).
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig
from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import path


class StewardAdminSite(admin.AdminSite):
    site_header = "Steward administration"

    @property
    def login_form(self):
        # Imported late: this module loads with the app registry, before any model can.
        from console.signin import AdminSignInForm

        return AdminSignInForm

    def get_urls(self):
        urls = super().get_urls()
        for i, pattern in enumerate(urls):
            if getattr(pattern, "name", None) == "view_on_site":
                urls[i] = path(
                    "r/<int:content_type_id>/<path:object_id>/",
                    self.admin_view(self.view_on_site),
                    name="view_on_site",
                )
        return urls

    def view_on_site(self, request, content_type_id, object_id):
        """Django's redirect to an object's own page (contenttypes' shortcut) finds the
        object in every tenant, and says "doesn't exist" only for one that does not: here
        it is looked up through its ModelAdmin's queryset first, so another tenant's
        object, or one of a model the site does not show, is missing like one that never was."""
        # Imported here: this module loads with the app registry, before any model can.
        from django.contrib.contenttypes import views as contenttype_views
        from django.contrib.contenttypes.models import ContentType

        content_type = ContentType.objects.filter(pk=content_type_id).first()
        model_admin = self._registry.get(content_type.model_class()) if content_type else None
        try:
            found = (
                model_admin is not None
                and "\x00" not in object_id  # PostgreSQL refuses it in text (a pool's name is its id)
                and model_admin.has_view_or_change_permission(request)
                and model_admin.get_queryset(request).filter(pk=object_id).exists()
            )
        except (ValueError, ValidationError):  # not an id of that model's kind
            found = False
        if not found:
            raise Http404(f"Content type {content_type_id} object {object_id} doesn’t exist")
        return contenttype_views.shortcut(request, content_type_id, object_id)


class AdminConfig(DjangoAdminConfig):
    default_site = "console.admin_site.StewardAdminSite"
