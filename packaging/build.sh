#!/usr/bin/env bash
# Build Rooflight's one-folder bundle into dist/rooflight/ (and a Linux tarball), then
# optionally smoke-test the built executable.
#
#   packaging/build.sh            build
#   packaging/build.sh --check    build, then run the bundle: --version, hardware --json,
#                                 estimate and chat on a generated GGUF, open the main window
#                                 offscreen and close it; every step must exit 0
#
# Needs the project installed in .venv with the `packaging` extra (PyInstaller); installs it
# when missing. Works from a clean checkout: `python3 -m venv .venv` first if there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
CHECK=0
[[ "${1:-}" == "--check" ]] && CHECK=1

if [[ ! -x "$PY" ]]; then
    python3 -m venv .venv
    PY=$ROOT/.venv/bin/python
fi
if ! "$PY" -c "import PyInstaller, rooflight" 2>/dev/null; then
    "$PY" -m pip install -e '.[packaging]'
fi

VERSION=$("$PY" -c "import rooflight; print(rooflight.__version__)")
echo "== building Rooflight $VERSION with PyInstaller"
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/rooflight.spec

BUNDLE=dist/rooflight
EXE=$BUNDLE/rooflight
case "$(uname -s)" in
    Linux)
        # desktop integration files travel inside the tarball, next to the executable
        mkdir -p "$BUNDLE/share/applications" "$BUNDLE/share/metainfo" "$BUNDLE/share/icons/hicolor/scalable/apps"
        cp packaging/linux/io.github.rooflight.Rooflight.desktop "$BUNDLE/share/applications/"
        cp packaging/linux/io.github.rooflight.Rooflight.metainfo.xml "$BUNDLE/share/metainfo/"
        cp resources/icons/rooflight.svg "$BUNDLE/share/icons/hicolor/scalable/apps/io.github.rooflight.Rooflight.svg"
        for png in resources/icons/rooflight-*.png; do
            size=$(basename "$png" .png); size=${size#rooflight-}
            mkdir -p "$BUNDLE/share/icons/hicolor/${size}x${size}/apps"
            cp "$png" "$BUNDLE/share/icons/hicolor/${size}x${size}/apps/io.github.rooflight.Rooflight.png"
        done
        cp packaging/linux/install.sh "$BUNDLE/"
        TARBALL=dist/rooflight-$VERSION-linux-$(uname -m).tar.gz
        tar -C dist -czf "$TARBALL" rooflight
        echo "== $TARBALL ($(du -h "$TARBALL" | cut -f1))"
        ;;
esac
echo "== bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1))"

if (( CHECK )); then
    echo "== smoke test of the bundle"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    # the bundle must not see the source tree or the venv
    export ROOFLIGHT_DATA_DIR=$WORK/data ROOFLIGHT_CACHE_DIR=$WORK/cache HF_HUB_OFFLINE=1
    export QT_QPA_PLATFORM=offscreen
    "$PY" -c "from rooflight.gguf.synthetic import write_model; write_model('$WORK/tiny.gguf', n_layer=2, n_embd=64, ftype='Q8_0')"
    (cd "$WORK" && env -u PYTHONPATH "$ROOT/$EXE" --version)
    (cd "$WORK" && env -u PYTHONPATH "$ROOT/$EXE" hardware --json > hardware.json && "$PY" -m json.tool hardware.json > /dev/null)
    (cd "$WORK" && env -u PYTHONPATH "$ROOT/$EXE" estimate tiny.gguf --json > estimate.json && "$PY" -m json.tool estimate.json > /dev/null)
    "$PY" packaging/smoke_extra.py "$ROOT/$EXE" "$WORK"
    echo "== smoke test passed"
fi
