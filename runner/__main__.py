"""``python -m runner grade|validate|bench`` (see runner/README.md)."""

import sys

from runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
