# Shared by baton-trainer's end-to-end tests. Source it with the test's arguments
# (<make_mnist> <baton-trainer>) from the runfiles directory Bazel starts the test in:
# it sets MAKE_MNIST and TRAINER (absolute paths), PY (Debian's python3, where
# python3-torch lives; not a pyenv python), makes a fresh work directory under TEST_TMPDIR
# the current directory (WORK), and defines fail and free_port.
MAKE_MNIST=$(realpath "$1")
TRAINER=$(realpath "$2")
PY=/usr/bin/python3
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/e2e.XXXXXX")
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }
# free_port: a loopback port the OS found free.
free_port() { "$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }
