"""The credential gateway: it verifies capability tokens through runtime.authz and holds
the provider keys, which never reach a worker."""
