from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Health, metrics and system status"

    def ready(self) -> None:
        # `signals` connects the Celery and model signals. `worker_gate` holds the worker's
        # consumer step (named by a string in overlap/celery.py): imported here, once, while
        # the process starts, a worker started in a thread beside the web server's never
        # resolves it while another thread is still importing it (seen once: "module
        # 'monitoring.worker_gate' has no attribute 'SandboxGate'").
        from monitoring import signals, worker_gate  # noqa: F401
