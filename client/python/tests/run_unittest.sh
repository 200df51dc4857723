#!/usr/bin/env bash
# Runs one unittest file (argument 1, a runfiles path) with /usr/bin/python3; the file puts
# the package it tests on sys.path itself (client/python, or the generated tree
# //client/python:package in the runfiles).
set -euo pipefail
exec /usr/bin/python3 -B "$1" -v
