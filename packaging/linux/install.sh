#!/usr/bin/env sh
# Install the unpacked Rooflight bundle for the current user: a launcher in ~/.local/bin,
# the desktop entry, AppStream metadata and icons under ~/.local/share.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-$HOME/.local}
mkdir -p "$PREFIX/bin" "$PREFIX/share"
ln -sf "$HERE/rooflight" "$PREFIX/bin/rooflight"
cp -r "$HERE/share/." "$PREFIX/share/"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$PREFIX/share/applications" || true
echo "Rooflight installed: run 'rooflight' or find it in your applications menu."
