import os
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ops.stack import Stack, parse_bind


def _interrupt(signum, frame):
    """SIGTERM behaves like Ctrl-C, so `kill` stops the children too."""
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Run Redis (unless REDIS_URL is set), a Celery worker and the web server."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=os.environ.get("OVERLAP_BIND", "127.0.0.1:8000"),
                            help="host:port of the web server (OVERLAP_BIND)")
        parser.add_argument("--port", type=int, default=None,
                            help="overrides the port of --bind")
        parser.add_argument(
            "--redis-port", type=int, default=int(os.environ.get("OVERLAP_REDIS_PORT", 6390))
        )
        parser.add_argument("--workers", type=int,
                            default=int(os.environ.get("OVERLAP_WORKERS", 1)),
                            help="Celery worker processes (each with its own sandbox pool)")
        parser.add_argument("--concurrency", type=int,
                            default=int(os.environ.get("OVERLAP_WORKER_CONCURRENCY", 2)))

    def handle(self, *args, bind, port, redis_port, workers, concurrency, **options):
        host, bound_port = parse_bind(bind)
        stack = Stack(settings.ROOT, settings.VAR_DIR, port or bound_port, redis_port,
                      log=lambda line: self.stdout.write(f"[overlap] {line}"), host=host,
                      workers=workers, concurrency=concurrency)
        # Ctrl-C and `kill` stop the stack even when it was started with SIGINT ignored
        # (a shell's background job without job control): Python then installs no
        # KeyboardInterrupt handler of its own.
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
        try:
            stack.start()
            mode = "DEBUG on (development only)" if settings.DEBUG else "DEBUG off"
            self.stdout.write(self.style.SUCCESS(
                f"[overlap] Overlap is running at {stack.url} ({mode}; Ctrl-C to stop)"
            ))
            stack.wait()  # restarts a component that dies; returns only on Ctrl-C/SIGTERM
        except KeyboardInterrupt:
            self.stdout.write("[overlap] stopping…")
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            stack.stop()
