"""Every page's screenshot, with the shots that need the source tree:

    python bench/screenshots.py OUTDIR [--theme light|dark] [--hardware FILE] [--only ...]

rooflight.ui.screenshots with bench/downloads_shot.py registered (real downloads from the
test suite's local Hub stand-in, tests/hub_server.py). The installed package alone takes
the same pictures, the Downloads page as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from downloads_shot import downloads_shot  # noqa: E402
from rooflight.ui import screenshots  # noqa: E402

if __name__ == "__main__":
    screenshots.EXTRA_SHOTS.setdefault("downloads", []).append(lambda page: [downloads_shot(page)])
    sys.exit(screenshots.main())
