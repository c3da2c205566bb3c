"""The operations console: htmx views, one module per screen, each rendering one page
template or, for an htmx request, the named partial it needs."""
