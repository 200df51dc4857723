"""Checks that tools/gpu/CMakeLists.txt (baton-trainer's build outside Bazel, for GPU
machines) compiles everything the trainer needs, without a CMake build or LibTorch:

  * every directory under worker/trainer/ holding library sources (.cc other than tests,
    fuzzers, mains and samples) is in its source globs;
  * every common/ header the trainer's sources include (directly or through other common/
    files) that has a .cc beside it has that .cc listed;
  * every header the trainer's sources include from the repository exists, or is one the
    CMakeLists generates (stb_image_fixed.h).

    cmake_sources_check.py REPO_ROOT
Exit 1 with one line per problem.
"""
import os
import re
import sys

# metrics_line.{h,cc}: the worker's parser of the trainer's metric lines (protobuf), not
# compiled into baton-trainer (the CMakeLists excludes it too).
SKIP = re.compile(r"(_test|_fuzz|_main|_sample)\.cc$|python_runner\.cc$|nccl_unavailable\.cc$"
                  r"|device_cpu\.cc$|nccl_communicator\.cc$|device_cuda\.cc$"
                  r"|metrics_line\.(cc|h)$")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def main(repo):
    cmake = open(os.path.join(repo, "tools/gpu/CMakeLists.txt")).read()
    globs = set(re.findall(r'"\$\{REPO\}/(worker/trainer(?:/[\w/]+)?)/\*\.cc"', cmake))
    listed = set(re.findall(r'"\$\{REPO\}/([\w/]+\.cc)"', cmake))
    generated = set(re.findall(r'"\$\{GENERATED\}/([\w/]+\.h)"', cmake))
    problems = []
    sources = []
    for root, _, files in os.walk(os.path.join(repo, "worker/trainer")):
        rel = os.path.relpath(root, repo)
        lib = [f for f in files if f.endswith(".cc") and not SKIP.search(f)]
        sources += [os.path.join(rel, f) for f in files if f.endswith((".cc", ".h"))
                    and not SKIP.search(f)]
        if lib and rel not in globs:
            problems.append("%s/*.cc is not in the source globs (has %s)" % (rel, ", ".join(sorted(lib))))
    # Trainer sources, then (transitively) the common/ files they include.
    seen = set(sources)
    while sources:
        src = sources.pop()
        for inc in INCLUDE.findall(open(os.path.join(repo, src)).read()):
            if "/" not in inc or inc.startswith(("absl/", "gtest/", "gmock/", "torch/", "ATen/", "c10/")):
                continue
            path = os.path.join(repo, inc)
            if not os.path.exists(path):
                if inc not in generated and not inc.startswith("proto/"):
                    problems.append("%s includes %s, which neither exists nor is generated" % (src, inc))
                continue
            cc = inc[:-2] + ".cc"
            if not inc.startswith("common/"):
                continue
            if os.path.exists(os.path.join(repo, cc)) and cc not in listed:
                problems.append("%s includes %s but %s is not compiled" % (src, inc, cc))
            for f in (inc, cc):
                if f not in seen and os.path.exists(os.path.join(repo, f)):
                    seen.add(f)
                    sources.append(f)
    for p in sorted(set(problems)):
        print(p)
    if problems:
        sys.exit("FAIL: tools/gpu/CMakeLists.txt misses %d thing(s)" % len(set(problems)))
    print("PASS: %d sources read, %d globs, %d listed common sources" %
          (len(seen), len(globs), len(listed)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
