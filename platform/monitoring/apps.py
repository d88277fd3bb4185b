from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Health, metrics and system status"

    def ready(self) -> None:
        from monitoring import signals  # noqa: F401  (connects Celery and model signals)
