"""The HTTP API under /api/v1/ (django-ninja): one router module per noun, each route
parsing its input, asking the web side's one access module, and calling one runtime service or selector."""
