#!/usr/bin/env bash
# Runs cmake_sources_check.py on the source tree this test's CMakeLists.txt comes from (the
# runfile is a link to it): the check reads every trainer and common/ source, more than a
# test can list as data.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
cmakelists=$(readlink -f tools/gpu/CMakeLists.txt)
repo=$(dirname "$(dirname "$(dirname "$cmakelists")")")
[[ -d $repo/worker/trainer ]] || { echo "FAIL: no source tree at $repo" >&2; exit 1; }
exec /usr/bin/python3 tools/gpu/cmake_sources_check.py "$repo"
