from django.contrib import admin
from django.urls import include, path

from console.api.api import api
from console.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("metrics", metrics, name="metrics"),
    path("gateway/", include("console.gateway.urls")),
    path("hooks/", include("console.hooks.urls")),
    path("", include("console.ui.urls")),
]
