#!/usr/bin/env bash
# Build llama.cpp's RPC backend from the very sources the installed llama-cpp-python
# vendors, so the libraries are ABI-identical to the Python bindings:
#   - libllama/libggml* with GGML_RPC=ON (load with LLAMA_CPP_LIB_PATH=<out>/lib), and
#   - ggml-rpc-server, the helper-machine server (`rooflight rpc-server` starts it).
# PyPI's llama-cpp-python is built without RPC, hence this script (issue 20).
# Usage: packaging/build_llama_rpc.sh [OUT_DIR]   (default: ~/.cache/rooflight/llama-rpc-<version>)
# Idempotent: an existing complete build is reused. Needs cmake and a C++ compiler.
set -euo pipefail
PY="${PYTHON:-python3}"
VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')"
OUT="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rooflight/llama-rpc-$VERSION}"
if [[ -x "$OUT/bin/ggml-rpc-server" && -f "$OUT/lib/libllama.so" && -f "$OUT/lib/libggml-rpc.so" ]]; then
  echo "$OUT"; exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-*.tar.gz -C "$WORK"
SRC="$(echo "$WORK"/llama_cpp_python-*/vendor/llama.cpp)"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_RPC=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >&2
cmake --build "$WORK/build" -j "$(nproc)" --target llama mtmd ggml-rpc-server >&2
mkdir -p "$OUT.tmp/lib" "$OUT.tmp/bin"
find "$WORK/build" -name 'lib*.so*' -exec cp -P {} "$OUT.tmp/lib/" \;
cp "$WORK/build/bin/ggml-rpc-server" "$OUT.tmp/bin/"
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
echo "$OUT"
