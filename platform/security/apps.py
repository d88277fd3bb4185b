from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "security"
    verbose_name = "Security hardening"

    def ready(self) -> None:
        from security import logs

        logs.install_token_redaction()
