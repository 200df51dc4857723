#!/usr/bin/env bash
# Lints every image's Dockerfile (dockerfile_lint.js: dockerfile-utils' validator plus the
# image policy) with the programs each must install, then proves each policy rule can fail:
# testdata/good.Dockerfile must pass and every testdata/bad_*.Dockerfile must fail with
# exactly the rule named on its first line (`# expect: RULE`).
set -euo pipefail
cd "${TEST_SRCDIR}/baton/deploy/docker"
NODE_TOOLS=${BATON_NODE_TOOLS:-/opt/baton-node-tools}
command -v node >/dev/null || { echo "FAIL: node is required (tools/install_deps.sh)" >&2; exit 1; }
[[ -d "$NODE_TOOLS/node_modules/dockerfile-utils" ]] ||
  { echo "FAIL: $NODE_TOOLS has no dockerfile-utils (tools/install_deps.sh)" >&2; exit 1; }
export NODE_PATH="$NODE_TOOLS/node_modules"
lint() { node dockerfile_lint.js "$@"; }

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The images and the programs each must hold in /usr/local/bin.
declare -A BINARIES=(
  [coordinator.Dockerfile]=baton-coordinator
  [worker.Dockerfile]=baton-worker,baton-trainer,baton,make_mnist
  [worker-cuda.Dockerfile]=baton-worker,baton-trainer,baton,make_mnist
)
shopt -s nullglob
dockerfiles=(*.Dockerfile)
((${#dockerfiles[@]} == ${#BINARIES[@]})) ||
  fail "deploy/docker has ${#dockerfiles[@]} Dockerfiles (${dockerfiles[*]})," \
    "the test knows ${#BINARIES[@]}"
for f in "${dockerfiles[@]}"; do
  [[ -n "${BINARIES[$f]:-}" ]] || { fail "$f: add it to BINARIES"; continue; }
  lint "$f" --binaries="${BINARIES[$f]}" || fail "$f"
done

lint testdata/good.Dockerfile --binaries=prog || fail "testdata/good.Dockerfile must pass"
bad=(testdata/bad_*.Dockerfile)
((${#bad[@]} > 0)) || fail "no testdata/bad_*.Dockerfile"
for f in "${bad[@]}"; do
  expected=$(sed -n '1s/^# expect: //p' "$f")
  rc=0
  out=$(lint "$f" --binaries=prog) || rc=$?
  rules=$(awk '$1 == "FAIL" { print $2 }' <<<"$out" | sort -u | tr '\n' ' ')
  if ((rc != 1)) || [[ "$rules" != "$expected " ]]; then
    fail "$f: expected exit 1 with rule '$expected', got exit $rc with rules '$rules'"
    echo "$out" >&2
  fi
done
echo "checked ${#dockerfiles[@]} Dockerfiles and ${#bad[@]} bad examples"
((failures == 0))
