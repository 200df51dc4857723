#!/usr/bin/env bash
# Runs one unittest file (argument 1, a runfiles path) with /usr/bin/python3; the file puts
# its package root (client/python) on sys.path itself.
set -euo pipefail
exec /usr/bin/python3 -B "$1" -v
