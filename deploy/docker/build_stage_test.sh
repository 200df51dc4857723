#!/usr/bin/env bash
# build_stage.sh's contracts that need neither root, the network nor Bazel: `libtorch`
# refuses a zip whose SHA-256 differs (before unpacking anything) and a zip that is not a
# LibTorch, and unpacks a good one into DEST/{include,lib}; the other commands refuse bad
# arguments before doing anything. The zips are served from file:// URLs.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
STAGE=deploy/docker/build_stage.sh
for tool in curl unzip sha256sum; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool is required (tools/install_deps.sh)" >&2; exit 1; }
done
T="$TEST_TMPDIR"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# expect_failure MESSAGE_REGEX COMMAND...: the command exits non-zero and says why.
expect_failure() {
  local want=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  if ((rc == 0)); then
    fail "'$*' succeeded"
  elif ! grep -qE "$want" <<<"$out"; then
    fail "'$*' failed without '$want': $out"
  fi
}

# make_zip NAME DIR: zips DIR's libtorch/ folder as pytorch.org's zips are laid out.
make_zip() {
  /usr/bin/python3 - "$T/$1" "$2" <<'PY'
import os, sys, zipfile
out, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w") as z:
    for d, _, files in os.walk(os.path.join(root, "libtorch")):
        for f in files:
            p = os.path.join(d, f)
            z.write(p, os.path.relpath(p, root))
PY
}
mkdir -p "$T/good/libtorch/include/torch/csrc/api/include/torch" "$T/good/libtorch/lib" \
  "$T/empty/libtorch/lib"
echo '// torch.h' >"$T/good/libtorch/include/torch/csrc/api/include/torch/torch.h"
echo 'not a library' >"$T/good/libtorch/lib/libtorch.so"
echo 'not a library' >"$T/empty/libtorch/lib/libc10.so"
make_zip good.zip "$T/good"
make_zip empty.zip "$T/empty"
good_sha=$(sha256sum "$T/good.zip" | cut -d' ' -f1)
empty_sha=$(sha256sum "$T/empty.zip" | cut -d' ' -f1)
other_sha=$(printf '%064d' 0)

expect_failure "does not have SHA-256" $STAGE libtorch "file://$T/good.zip" "$other_sha" "$T/dest1"
[[ ! -e "$T/dest1" && ! -e "$T/dest1.unpack" ]] || fail "a zip with the wrong checksum was unpacked"
expect_failure "64 lowercase hex" $STAGE libtorch "file://$T/good.zip" "${good_sha:0:63}" "$T/dest1"
expect_failure "is not an unpacked LibTorch" \
  $STAGE libtorch "file://$T/empty.zip" "$empty_sha" "$T/dest2"
expect_failure "" $STAGE libtorch "file://$T/missing.zip" "$good_sha" "$T/dest3"
if $STAGE libtorch "file://$T/good.zip" "$good_sha" "$T/dest4"; then
  [[ -f "$T/dest4/include/torch/csrc/api/include/torch/torch.h" &&
     -f "$T/dest4/lib/libtorch.so" ]] ||
    fail "the good zip was not unpacked into DEST/include, DEST/lib"
  [[ ! -e "$T/dest4.unpack" ]] || fail "the unpack folder was left behind"
else
  fail "the good zip with its checksum was refused"
fi

expect_failure "PROFILE must be base, cpu or cuda" $STAGE deps gpu
expect_failure "CUDA_MAJOR_MINOR like 12.4" $STAGE cuda-repo 12 2.21.5-1
expect_failure "NCCL_VERSION like 2.21.5-1" $STAGE cuda-repo 12.4 latest
expect_failure "unknown program 'baton-foo'" $STAGE build "$T/out" baton-foo
expect_failure "usage" $STAGE
((failures == 0))
