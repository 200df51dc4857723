"""@etcd_api: etcd v3's gRPC API (KV, Watch, Lease, Cluster, Maintenance, Auth) for C++,
from the .proto files of Debian's golang-etcd-server-dev (etcd 3.4), the API the coordinator's
etcd store speaks to `etcd` (Debian's etcd-server).

The files carry gogoproto options (Go code generation) and google.api.http annotations (the
JSON gateway), whose imports neither protoc nor Debian's protobuf has. Both are metadata:
the rule drops those imports, the file options `option (gogoproto.*)` and the methods'
`option (google.api.http) = {...};` blocks, and moves the three files under etcd/api/
(imports rewritten to match). Messages, fields, numbers and services are untouched, so the
bytes on the wire are etcd's.

    @etcd_api//:rpc_proto  (etcdserverpb: KV, Watch, Lease, ...; deps :kv_proto, :auth_proto)
"""

_SRC = "/usr/share/gocode/src/go.etcd.io/etcd"

# Debian path below _SRC -> path in this repository (= the import path).
_FILES = {
    "mvcc/mvccpb/kv.proto": "etcd/api/mvccpb/kv.proto",
    "auth/authpb/auth.proto": "etcd/api/authpb/auth.proto",
    "etcdserver/etcdserverpb/rpc.proto": "etcd/api/etcdserverpb/rpc.proto",
}

_IMPORTS = {
    'import "etcd/mvcc/mvccpb/kv.proto";': 'import "etcd/api/mvccpb/kv.proto";',
    'import "etcd/auth/authpb/auth.proto";': 'import "etcd/api/authpb/auth.proto";',
}

def strip_etcd_proto(text):
    """`text` without its gogoproto and google.api imports and options (see above)."""
    out = []
    depth = 0  # > 0 inside an `option (google.api.http) = {...};` block
    for line in text.split("\n"):
        s = line.strip()
        if depth > 0:
            depth += s.count("{") - s.count("}")
            continue
        if s.startswith("option (google.api.http)"):
            depth = s.count("{") - s.count("}")
            continue
        if s.startswith("import \"gogoproto/") or s.startswith("import \"google/api/"):
            continue
        if s.startswith("option (gogoproto."):
            continue
        out.append(_IMPORTS.get(s, line))
    return "\n".join(out)

_BUILD = """
load("@rules_cc//cc:defs.bzl", "cc_proto_library")
load("@rules_proto//proto:defs.bzl", "proto_library")
load("@//tools:grpc.bzl", "cc_grpc_library")

package(default_visibility = ["//visibility:public"])

proto_library(name = "kv_proto", srcs = ["etcd/api/mvccpb/kv.proto"])

proto_library(name = "auth_proto", srcs = ["etcd/api/authpb/auth.proto"])

proto_library(
    name = "rpc_proto",
    srcs = ["etcd/api/etcdserverpb/rpc.proto"],
    deps = [":auth_proto", ":kv_proto"],
)

cc_proto_library(name = "rpc_cc_proto", deps = [":rpc_proto"])

# #include "etcd/api/etcdserverpb/rpc.grpc.pb.h": etcdserverpb::KV, Watch, Lease, ...
cc_grpc_library(name = "rpc_cc_grpc", proto = ":rpc_proto", cc_proto = ":rpc_cc_proto")
"""

def _etcd_api_impl(rctx):
    for src, dst in _FILES.items():
        path = rctx.path(_SRC + "/" + src)
        if not path.exists:
            fail(("%s is missing: etcd's API protos come from Debian's golang-etcd-server-dev " +
                  "(apt-get install golang-etcd-server-dev; tools/install_deps.sh does)") % path)
        rctx.file(dst, strip_etcd_proto(rctx.read(path)), executable = False)
    rctx.file("BUILD.bazel", _BUILD, executable = False)
    rctx.file("WORKSPACE", "workspace(name = \"etcd_api\")\n", executable = False)

etcd_api = repository_rule(
    implementation = _etcd_api_impl,
    local = True,
)
