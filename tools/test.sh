#!/usr/bin/env bash
# The whole test suite: installs what is needed (Debian 12, as root), then `bazel test //...`.
# Usage: tools/test.sh [extra bazel test args]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
exec bazel test //... "$@"
