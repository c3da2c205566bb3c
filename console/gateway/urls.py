from django.urls import path, re_path

from console.gateway import views

urlpatterns = [
    path("model/v1/chat/completions", views.chat_completions, name="gateway-chat-completions"),
    re_path(r"^tools/(?P<name>[a-z][a-z0-9_-]{0,62})/(?P<path>.*)$", views.tool, name="gateway-tool"),
]
