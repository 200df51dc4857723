"""import_path: a proto source's import path, shared by the codegen rules (grpc.bzl, py_grpc.bzl)."""

def import_path(src, root):
    """The import path of `src` (a File in a ProtoInfo's direct_sources) below `root` (the
    ProtoInfo's proto_source_root): "baton/v1/job.proto" for proto/baton/v1/job.proto of
    a proto_library with strip_import_prefix = "/proto"."""
    if root in ("", "."):
        return src.path
    if src.path.startswith(root + "/"):
        return src.path[len(root) + 1:]
    return src.short_path
