import os
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ops.stack import Stack


def _interrupt(signum, frame):
    """SIGTERM behaves like Ctrl-C, so `kill` stops the children too."""
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Run Redis (unless REDIS_URL is set), a Celery worker and the web server."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("OVERLAP_PORT", 8000)))
        parser.add_argument(
            "--redis-port", type=int, default=int(os.environ.get("OVERLAP_REDIS_PORT", 6390))
        )

    def handle(self, *args, port, redis_port, **options):
        stack = Stack(settings.ROOT, settings.VAR_DIR, port, redis_port,
                      log=lambda line: self.stdout.write(f"[overlap] {line}"))
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            stack.start()
            self.stdout.write(self.style.SUCCESS(
                f"[overlap] Overlap is running at http://127.0.0.1:{port}/ (Ctrl-C to stop)"
            ))
            code = stack.wait()
            if code:
                raise CommandError("a component stopped unexpectedly; stopping the others")
        except KeyboardInterrupt:
            self.stdout.write("[overlap] stopping…")
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            stack.stop()
