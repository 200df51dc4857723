"""cc_grpc_library: gRPC C++ stubs from a proto_library, with the system grpc_cpp_plugin.

Messages come from the native cc_proto_library (toolchain @com_google_protobuf//:cc_toolchain);
this rule only adds the *.grpc.pb.{h,cc} service stubs, reading the ProtoInfo of the
proto_library (descriptor sets), so imports/WKTs work exactly as for cc_proto_library.

    proto_library(name = "foo_proto", srcs = ["foo.proto"])
    cc_proto_library(name = "foo_cc_proto", deps = [":foo_proto"])
    cc_grpc_library(name = "foo_cc_grpc", proto = ":foo_proto", cc_proto = ":foo_cc_proto")

The stubs are generated under <package>/<name>_codegen/<import path> and included by their
import path, like the messages: a proto imported as "baton/v1/foo.proto" (the
proto_library's strip_import_prefix) gives #include "baton/v1/foo.grpc.pb.h".
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@rules_proto//proto:defs.bzl", "ProtoInfo")
load("//tools:proto_paths.bzl", "import_path", "output_root")

def _grpc_cc_codegen_impl(ctx):
    info = ctx.attr.proto[ProtoInfo]
    hdrs, srcs, imports = [], [], []
    for src in info.direct_sources:
        imp = import_path(src, info.proto_source_root)
        stem = ctx.label.name + "/" + imp[:-len(".proto")]
        hdrs.append(ctx.actions.declare_file(stem + ".grpc.pb.h"))
        srcs.append(ctx.actions.declare_file(stem + ".grpc.pb.cc"))
        imports.append(imp)

    out_root = output_root(ctx)

    args = ctx.actions.args()
    args.add("--plugin=protoc-gen-grpc=" + ctx.executable._plugin.path)
    args.add("--grpc_out=" + out_root)
    args.add_joined("--descriptor_set_in", info.transitive_descriptor_sets, join_with = ":")
    args.add_all(imports)
    ctx.actions.run(
        executable = ctx.executable._protoc,
        tools = [ctx.executable._plugin],
        inputs = info.transitive_descriptor_sets,
        outputs = hdrs + srcs,
        arguments = [args],
        mnemonic = "GrpcCppGen",
        progress_message = "Generating gRPC C++ stubs for %s" % ctx.label,
    )
    return [
        DefaultInfo(files = depset(hdrs + srcs)),
        OutputGroupInfo(hdrs = depset(hdrs), srcs = depset(srcs)),
    ]

_grpc_cc_codegen = rule(
    implementation = _grpc_cc_codegen_impl,
    attrs = {
        "proto": attr.label(mandatory = True, providers = [ProtoInfo]),
        "_protoc": attr.label(default = "@com_google_protobuf//:protoc", executable = True, cfg = "exec", allow_single_file = True),
        "_plugin": attr.label(default = "@system//:grpc_cpp_plugin", executable = True, cfg = "exec", allow_single_file = True),
    },
)

def cc_grpc_library(name, proto, cc_proto, deps = [], **kwargs):
    """Macro: codegen rule + cc_library(hdrs=*.grpc.pb.h, srcs=*.grpc.pb.cc)."""
    _grpc_cc_codegen(name = name + "_codegen", proto = proto, visibility = ["//visibility:private"])
    native.filegroup(name = name + "_hdrs", srcs = [":" + name + "_codegen"], output_group = "hdrs")
    native.filegroup(name = name + "_srcs", srcs = [":" + name + "_codegen"], output_group = "srcs")
    cc_library(
        name = name,
        hdrs = [":" + name + "_hdrs"],
        srcs = [":" + name + "_srcs"],
        strip_include_prefix = name + "_codegen",
        deps = [cc_proto, "@system//:grpc"] + deps,
        **kwargs
    )
