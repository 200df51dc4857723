"""Paths shared by the codegen rules (grpc.bzl, py_grpc.bzl)."""

def import_path(src, root):
    """The import path of `src` (a File in a ProtoInfo's direct_sources) below `root` (the
    ProtoInfo's proto_source_root): "baton/v1/job.proto" for proto/baton/v1/job.proto of
    a proto_library with strip_import_prefix = "/proto"."""
    if root in ("", "."):
        return src.path
    if src.path.startswith(root + "/"):
        return src.path[len(root) + 1:]
    return src.short_path

def output_root(ctx):
    """<bin>/<repository root>/<package>/<rule name>: where a codegen rule writes its tree,
    so that a file declared as "<rule name>/<import path>" lands at <import path> below it."""
    root = ctx.bin_dir.path
    if ctx.label.workspace_root:
        root += "/" + ctx.label.workspace_root
    if ctx.label.package:
        root += "/" + ctx.label.package
    return root + "/" + ctx.label.name
