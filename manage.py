#!/usr/bin/env python
"""Django's command-line entry point for Overlap."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def main() -> None:
    # `platform/` is a plain folder (not a package: that name would shadow the standard
    # library's `platform`); its contents — the project package and the apps — go on the
    # path, and so does the repository root, for `runner`.
    sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "overlap.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
