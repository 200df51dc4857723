"""py_grpc_package: a Python package tree with generated message and gRPC stubs.

The system protoc writes the messages (*_pb2.py) and the system grpc_python_plugin the
service stubs (*_pb2_grpc.py) of every proto_library in `protos`, at their import paths
("baton/v1/job.proto" -> baton/v1/job_pb2.py, which imports baton.v1.*). The hand-written
`srcs` are linked into the same tree at their paths below `strip_prefix`, so that one
directory on PYTHONPATH holds the whole package (a regular package such as `baton` cannot
be split over two sys.path entries). Every generated directory without an __init__.py in
`srcs` gets an empty one.

    py_grpc_package(
        name = "pkg",
        srcs = ["baton/__init__.py", "baton/client.py"],
        protos = ["//proto/baton/v1:job_service_proto"],
    )
    # -> <bin>/<package>/pkg/baton/{__init__,client}.py, pkg/baton/v1/{__init__,
    #    job_pb2, job_pb2_grpc, job_service_pb2, job_service_pb2_grpc}.py

A test puts $RUNFILES/<workspace>/<package>/<name> on PYTHONPATH. Nothing generated is
checked in; client/python/setup.py does the same at pip-install time.
"""

load("@rules_proto//proto:defs.bzl", "ProtoInfo")
load("//tools:proto_paths.bzl", "import_path", "output_root")

def _py_grpc_package_impl(ctx):
    out_root = output_root(ctx)

    outputs = []
    have = {}

    # Hand-written sources, linked at their package-relative paths.
    prefix = ctx.label.package + "/" if ctx.label.package else ""
    if ctx.attr.strip_prefix:
        prefix += ctx.attr.strip_prefix.rstrip("/") + "/"
    for src in ctx.files.srcs:
        rel = src.short_path
        if not rel.startswith(prefix):
            fail("%s is not below %s" % (src.short_path, prefix))
        rel = rel[len(prefix):]
        out = ctx.actions.declare_file(ctx.label.name + "/" + rel)
        ctx.actions.symlink(output = out, target_file = src)
        outputs.append(out)
        have[rel] = True

    # Generated stubs of every direct source of every proto_library.
    imports, generated, descriptor_sets = [], [], []
    for proto in ctx.attr.protos:
        info = proto[ProtoInfo]
        descriptor_sets.append(info.transitive_descriptor_sets)
        for src in info.direct_sources:
            imp = import_path(src, info.proto_source_root)
            stem = imp[:-len(".proto")]
            imports.append(imp)
            for suffix in ("_pb2.py", "_pb2_grpc.py"):
                generated.append(ctx.actions.declare_file(ctx.label.name + "/" + stem + suffix))
                have[stem + suffix] = True
    descriptors = depset(transitive = descriptor_sets)

    args = ctx.actions.args()
    args.add("--plugin=protoc-gen-grpc_python=" + ctx.executable._plugin.path)
    args.add("--python_out=" + out_root)
    args.add("--grpc_python_out=" + out_root)
    args.add_joined("--descriptor_set_in", descriptors, join_with = ":")
    args.add_all(imports)
    ctx.actions.run(
        executable = ctx.executable._protoc,
        tools = [ctx.executable._plugin],
        inputs = descriptors,
        outputs = generated,
        arguments = [args],
        mnemonic = "GrpcPyGen",
        progress_message = "Generating Python protobuf and gRPC stubs for %s" % ctx.label,
    )
    outputs += generated

    # Empty __init__.py in every generated directory that has none.
    dirs = {}
    for path in have.keys():
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs["/".join(parts[:i])] = True
    for d in sorted(dirs.keys()):
        init = d + "/__init__.py"
        if init in have:
            continue
        out = ctx.actions.declare_file(ctx.label.name + "/" + init)
        ctx.actions.write(out, "")
        outputs.append(out)

    return [DefaultInfo(files = depset(outputs), runfiles = ctx.runfiles(files = outputs))]

py_grpc_package = rule(
    implementation = _py_grpc_package_impl,
    doc = "A Python package tree: `srcs` plus the generated stubs of `protos`.",
    attrs = {
        "srcs": attr.label_list(allow_files = [".py"], doc = "Hand-written modules."),
        "strip_prefix": attr.string(doc = "Folder below the BUILD file's package that `srcs` are relative to."),
        "protos": attr.label_list(mandatory = True, providers = [ProtoInfo]),
        "_protoc": attr.label(default = "@com_google_protobuf//:protoc", executable = True, cfg = "exec", allow_single_file = True),
        "_plugin": attr.label(default = "@system//:grpc_python_plugin", executable = True, cfg = "exec", allow_single_file = True),
    },
)
