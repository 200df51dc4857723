"""Builds the `baton` package: the in-script helper (baton/__init__.py) and the gRPC client
(baton.client), whose message and service stubs (baton/v1/*_pb2.py, *_pb2_grpc.py) are
generated here, at build time, from proto/baton/v1 by the system protoc and
grpc_python_plugin (Debian: protobuf-compiler, protobuf-compiler-grpc). They are written
into the build directory only, never into the source tree, and are not checked in.

    pip install --no-index --no-build-isolation ./client/python

The .proto files are looked for in ../../proto (this folder inside a Baton checkout), or
in $BATON_PROTO_DIR; PROTOC and GRPC_PYTHON_PLUGIN name the tools if not on PATH.
Metadata is in pyproject.toml.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["baton/v1/job.proto", "baton/v1/job_service.proto"]


class BuildPyWithStubs(build_py):
    """build_py, then protoc --python_out --grpc_python_out into the build directory."""

    def run(self):
        super().run()
        if not self.dry_run:
            self.generate_stubs(self.build_lib)

    def generate_stubs(self, out_dir):
        proto_dir = os.environ.get("BATON_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
        missing = [p for p in PROTOS if not os.path.isfile(os.path.join(proto_dir, p))]
        if missing:
            raise SystemExit(
                "baton: cannot generate the gRPC stubs: %s not found in %s (build from a "
                "Baton checkout, or set BATON_PROTO_DIR to its proto/ folder)"
                % (", ".join(missing), os.path.abspath(proto_dir)))
        protoc = shutil.which(os.environ.get("PROTOC", "protoc"))
        plugin = shutil.which(os.environ.get("GRPC_PYTHON_PLUGIN", "grpc_python_plugin"))
        if protoc is None or plugin is None:
            raise SystemExit(
                "baton: cannot generate the gRPC stubs: %s not found (apt-get install %s, or "
                "set %s)" % (
                    "protoc" if protoc is None else "grpc_python_plugin",
                    "protobuf-compiler" if protoc is None else "protobuf-compiler-grpc",
                    "PROTOC" if protoc is None else "GRPC_PYTHON_PLUGIN"))
        os.makedirs(os.path.join(out_dir, "baton", "v1"), exist_ok=True)
        command = [protoc, "-I" + proto_dir, "--python_out=" + out_dir,
                   "--grpc_python_out=" + out_dir,
                   "--plugin=protoc-gen-grpc_python=" + plugin] + PROTOS
        self.announce("generating stubs: " + " ".join(command), level=2)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("baton: protoc failed (%d): %s" % (done.returncode,
                                                                done.stderr.strip()))
        with open(os.path.join(out_dir, "baton", "v1", "__init__.py"), "w") as f:
            f.write("")


setup(cmdclass={"build_py": BuildPyWithStubs})
