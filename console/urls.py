from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from console.api.api import api
from console.metrics import metrics

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("metrics", metrics, name="metrics"),
]
