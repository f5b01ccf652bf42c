"""Render resources/icons/rooflight.svg to the PNG sizes desktops ask for (run after editing it).

    python packaging/make_icons.py
"""

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - needed by QImage text/svg
    renderer = QSvgRenderer(str(ICONS / "rooflight.svg"))
    if not renderer.isValid():
        print("rooflight.svg does not render", file=sys.stderr)
        return 1
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        image.save(str(ICONS / f"rooflight-{size}.png"))
    print(f"wrote {len(SIZES)} PNG sizes to {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
