import sys

from rooflight.cli import main

sys.exit(main())
