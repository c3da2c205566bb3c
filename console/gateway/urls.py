from django.urls import path, re_path

from console.gateway import views

urlpatterns = [
    # The minting service: a worker's token for an attempt it holds (docs/adr/0034-token-minting.md).
    path("tokens", views.tokens, name="gateway-tokens"),
    path("model/v1/chat/completions", views.chat_completions, name="gateway-chat-completions"),
    # [\s\S]: a path holding a decoded newline still reaches the view, which refuses it
    # with its reason (TOOL_PATH_REFUSED, control) rather than a bare 404.
    re_path(r"^tools/(?P<name>[a-z][a-z0-9_-]{0,62})/(?P<path>[\s\S]*)$", views.tool, name="gateway-tool"),
]
