"""Entry point of the frozen app: the same `main` as the `rooflight` console script."""

import sys

from rooflight.cli import main

if __name__ == "__main__":
    sys.exit(main())
