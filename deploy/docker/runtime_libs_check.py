#!/usr/bin/env python3
"""Checks an image's runtime package list against the shared libraries its programs link.

Usage: runtime_libs_check.py --dockerfile=F --binary=B [--binary=B ...]
           [--provided=REGEX] [--extra=PKG ...]

Reads the Debian packages the Dockerfile's final stage installs (every `apt-get install`
in its RUN instructions; a package named through a shell variable is ignored), then maps
each DT_NEEDED entry of each binary (readelf -d) to the file the loader picks here (ldd)
and that file to its Debian package (dpkg -S). Fails (exit 1, a line per problem) if
  - a needed library's package is neither installed by the Dockerfile nor part of every
    Debian 12 base image (BASE_PACKAGES): the image would not start that program;
  - a library has no package here (built outside Debian: the check cannot vouch for it);
  - the Dockerfile installs a package no binary needs and that is not in ALWAYS_ALLOWED
    or --extra: the image is not slim.
Libraries whose soname matches --provided come from elsewhere (e.g. a copied LibTorch) and
are skipped. Transitive dependencies are Debian's business: apt installs each package's
Depends, so checking direct dependencies is enough.
"""

import argparse
import os
import re
import subprocess
import sys

# Priority: required in Debian 12, so present in debian:12-slim (libstdc++6 comes with apt).
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# Installed by every image for other reasons: the init (the Dockerfile policy requires it)
# and the trust store for TLS to outside services.
ALWAYS_ALLOWED = {"tini", "ca-certificates"}


def instructions(text):
    """Yields (keyword, args) with continuations joined and comment lines dropped."""
    current = None
    for raw in text.split("\n"):
        stripped = raw.strip()
        if stripped.startswith("#") or (current is None and not stripped):
            continue
        continued = re.search(r"\\\s*$", raw) is not None
        body = re.sub(r"\\\s*$", "", raw).strip()
        current = body if current is None else current + " " + body
        if not continued:
            keyword, _, args = current.partition(" ")
            yield keyword.upper(), args.strip()
            current = None
    if current is not None:
        keyword, _, args = current.partition(" ")
        yield keyword.upper(), args.strip()


def final_stage_packages(text):
    """Returns the packages `apt-get install`ed by the last stage's RUN instructions."""
    runs = []
    for keyword, args in instructions(text):
        if keyword == "FROM":
            runs = []
        elif keyword == "RUN":
            runs.append(args)
    packages = set()
    for run in runs:
        for command in re.split(r"&&|\|\||;", run):
            words = command.split()
            if "apt-get" not in words or "install" not in words:
                continue
            for word in words[words.index("install") + 1:]:
                if word.startswith("-") or "$" in word:
                    continue
                packages.add(word.split("=")[0].strip("\"'"))
    return packages


def needed_libraries(binary):
    """Returns [(soname, path or None)] for the binary's DT_NEEDED entries."""
    dynamic = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True,
                             text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    ldd = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = {}
    for line in ldd.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            paths[m.group(1)] = m.group(2)
        m = re.match(r"\s*(/\S+) \(0x", line)
        if m:
            paths[os.path.basename(m.group(1))] = m.group(1)
    return [(soname, paths.get(soname)) for soname in needed]


def candidates(path):
    """The names dpkg may know path under (both sides of the /usr merge, symlink resolved)."""
    names = []
    for p in (path, os.path.realpath(path)):
        names.append(p)
        names.append(p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p)
    return names


def owning_packages(paths):
    """Maps each of paths to the Debian package owning it (absent if none), with one dpkg
    query for all of them."""
    queries = sorted({c for p in paths for c in candidates(p)})
    # Exits 1 when some name has no owner; the owners it found are still printed.
    out = subprocess.run(["dpkg", "-S", *queries], capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        # "libfoo1:amd64: /path" or "pkg1, pkg2: /path" (the first owner is enough).
        packages, sep, name = line.rpartition(": ")
        if sep:
            owner[name] = packages.split(",")[0].split(":")[0].strip()
    result = {}
    for p in paths:
        found = [owner[c] for c in candidates(p) if c in owner]
        if found:
            result[p] = found[0]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dockerfile", required=True)
    parser.add_argument("--binary", action="append", required=True)
    parser.add_argument("--provided", default=None)
    parser.add_argument("--extra", action="append", default=[])
    args = parser.parse_args()

    with open(args.dockerfile, encoding="utf-8") as f:
        installed = final_stage_packages(f.read())
    provided = re.compile(args.provided) if args.provided else None
    problems = []
    needed_packages = set()
    libraries = {binary: needed_libraries(binary) for binary in args.binary}
    owners = owning_packages([path for needed in libraries.values() for _, path in needed if path])
    for binary, needed in libraries.items():
        for soname, path in needed:
            if provided and provided.search(soname):
                continue
            if path is None:
                problems.append(f"{binary}: {soname} is not found here")
                continue
            package = owners.get(path)
            if package is None:
                problems.append(f"{binary}: {soname} ({path}) belongs to no Debian package")
                continue
            needed_packages.add(package)
            if package not in installed and package not in BASE_PACKAGES:
                problems.append(f"{binary}: {soname} needs package {package}, which "
                                f"{args.dockerfile} does not install")
    for package in sorted(installed - needed_packages - ALWAYS_ALLOWED - set(args.extra)):
        problems.append(f"{args.dockerfile} installs {package}, which no program needs "
                        "(drop it, or pass --extra with the reason in the test)")
    for problem in problems:
        print("FAIL: " + problem)
    if not problems:
        print(f"OK {args.dockerfile}: {len(installed)} packages cover "
              f"{len(needed_packages)} needed by {len(args.binary)} programs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
