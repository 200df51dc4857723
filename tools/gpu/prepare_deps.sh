#!/usr/bin/env bash
# Copies what tools/gpu/CMakeLists.txt needs beyond LibTorch, from this machine's Debian
# packages (libabsl-dev, libstb-dev, libgloo-dev), into OUT (default .gpu_deps/, ignored by
# git): include/{absl,stb}, lib/libabsl_*.so*, gloo_include/gloo. A machine without those
# packages (a GPU machine with only a pip torch) then builds with -DBATON_DEPS_DIR=OUT.
# Nothing is committed: these are the installed packages' files, copied at run time.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-.gpu_deps}
rm -rf "$OUT"
mkdir -p "$OUT/include" "$OUT/lib" "$OUT/gloo_include"
cp -r /usr/include/absl /usr/include/stb "$OUT/include/"
cp -a /usr/lib/x86_64-linux-gnu/libabsl_*.so* "$OUT/lib/"
cp -r /usr/include/gloo "$OUT/gloo_include/"
du -sh "$OUT"
