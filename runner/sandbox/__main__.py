"""`python -m runner.sandbox`: which sandbox backends can run here, and which auto picks.

Exit status 0 when an isolating backend (docker or bwrap) is available, 1 otherwise, so
`make` can tell; prints one line per backend.
"""

import sys

from runner.sandbox.backends.base import SandboxUnavailable
from runner.sandbox.choice import backend_problems, choose_backend


def main() -> int:
    for name, problem in backend_problems().items():
        print(f"{name:8} {'ready' if problem is None else problem}")
    try:
        chosen = choose_backend("auto", allow_unisolated=False)
    except SandboxUnavailable:
        print("auto     process only: runs would NOT be isolated", file=sys.stderr)
        return 1
    print(f"auto     {chosen.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
