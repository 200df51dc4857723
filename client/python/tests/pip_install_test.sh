#!/usr/bin/env bash
# `pip install --no-index --no-build-isolation` of a copy of client/python (beside a copy
# of proto/, as in a checkout) generates the baton.v1 stubs at build time: `import
# baton.client` works from the installed copy, nothing is generated into the source tree,
# and a missing grpc_python_plugin fails the install with a message naming it. The README's
# way for a user: Debian 12's Python refuses a system-wide pip install
# (externally-managed-environment), a venv with --system-site-packages (which sees
# Debian's grpcio, protobuf and yaml) takes it.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:-$PWD}/baton
WORK=${TEST_TMPDIR:-$(mktemp -d)}/pip
rm -rf "$WORK"
SRC=$WORK/src
mkdir -p "$SRC/client/python/baton" "$SRC/proto/baton/v1"
cp -L "$RUNFILES"/client/python/{setup.py,pyproject.toml} "$SRC/client/python/"
cp -L "$RUNFILES"/client/python/baton/*.py "$SRC/client/python/baton/"
cp -L "$RUNFILES"/proto/baton/v1/*.proto "$SRC/proto/baton/v1/"
chmod -R u+w "$SRC"

/usr/bin/python3 -c "import setuptools, wheel, pip" 2>/dev/null \
  || { echo "FAIL: pip, setuptools and wheel are needed: apt-get install python3-pip"; exit 1; }
export HOME=$WORK PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_install() {
  /usr/bin/python3 -m pip install --no-index --no-build-isolation --target "$1" \
    "$SRC/client/python"
}

pip_install "$WORK/site" >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; exit 1; }
[[ ! -e "$SRC/client/python/baton/v1" ]] || { echo "FAIL: stubs written into the sources"; exit 1; }
cd "$WORK"
PYTHONPATH=$WORK/site /usr/bin/python3 -B - "$WORK/site" <<'PY'
import os, sys
import baton
import baton.client as bc
import baton.v1.job_pb2
site = sys.argv[1]
assert bc.__file__.startswith(site), bc.__file__
stubs = baton.v1.job_pb2.__file__
assert stubs.startswith(os.path.join(site, "baton", "v1")), stubs
spec = bc.to_job_spec({"name": "x", "workers": {"min": 1}, "checkpoint_dir": "c"})
assert spec.checkpoint_dir == os.path.join(os.getcwd(), "c"), spec
assert bc.Client(insecure=True, coordinator="127.0.0.1:1").connection.insecure
print("installed baton.client works:", bc.__file__)
PY

if GRPC_PYTHON_PLUGIN=/nonexistent/grpc_python_plugin pip_install "$WORK/site2" \
    >"$WORK/pip2.log" 2>&1; then
  echo "FAIL: the install succeeded without grpc_python_plugin"
  exit 1
fi
grep -q "grpc_python_plugin not found (apt-get install protobuf-compiler-grpc" "$WORK/pip2.log" \
  || { cat "$WORK/pip2.log"; echo "FAIL: no clear error for the missing plugin"; exit 1; }
# The README's path on a plain Debian 12 Python.
if /usr/bin/python3 -m pip install --no-index --no-build-isolation --dry-run "$SRC/client/python" \
    >"$WORK/system.log" 2>&1; then
  echo "note: this Python accepts system-wide installs"
else
  grep -q "externally-managed-environment" "$WORK/system.log" \
    || { cat "$WORK/system.log"; echo "FAIL: the system install failed otherwise"; exit 1; }
fi
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv" \
  || { echo "FAIL: no venv module with pip: apt-get install python3-venv"; exit 1; }
"$WORK/venv/bin/pip" install --no-index --no-build-isolation "$SRC/client/python" \
  >"$WORK/venv.log" 2>&1 || { cat "$WORK/venv.log"; echo "FAIL: the venv install failed"; exit 1; }
(cd "$WORK" && "$WORK/venv/bin/python" -B -c '
import sys, baton.client, grpc, yaml
assert baton.client.__file__.startswith(sys.prefix), baton.client.__file__
print("venv install works:", baton.client.__file__)')
echo "PASS"
