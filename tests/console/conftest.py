from tests.console.world import as_person, world  # noqa: F401 - fixtures
