import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "overlap.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
