from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    verbose_name = "Steward runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Agents register themselves on import; workers, the CLI and the web all need
        # the same registry, so every process imports the configured modules here.
        from runtime import agents

        agents.load_agent_modules()
