"""Job specs for baton.client: a dict, a job YAML file or a JobSpec, into a baton.v1.JobSpec.

The YAML shape is the CLI's (client/job/job_file.h, client/job/yaml_proto.h): a mapping of
JobSpec fields by their proto names (snake_case), converted generically over the message
descriptor, so new proto fields need no code here:

    message                      mapping (null: the message is set, empty)
    int32/int64/uint32/uint64    integer (in YAML: a plain, unquoted decimal scalar)
    double/float                 number; in YAML also .inf, -.inf, .nan
    bool                         true / false
    string                       any scalar, taken verbatim (in YAML `name: 123` is "123");
                                 in a dict a str, or an int as its decimal text (so that
                                 {"priority": 100} reads as `priority: 100` does)
    enum                         the value's name, e.g. STREAM_STDOUT (or its number)
    google.protobuf.Duration     "90s", "1h30m", "250ms" (Go/absl style), or a timedelta
    google.protobuf.Timestamp    RFC 3339, e.g. "2024-05-01T12:00:00Z", or an aware datetime
    repeated                     list (null: empty)
    map<K, V>                    mapping
    a null singular scalar leaves the field unset; setting a proto3 `optional` field, even
    to 0, gives it presence. Two members of one oneof or an unknown field are errors.

Afterwards relative paths in trainer.data_dir, checkpoint_dir and command.working_dir are
made absolute against the job file's directory (the current directory for a dict), and
lexically normalised, as the CLI does.

Every error is InvalidArgument: "<source>:<line>:<column>: <field path>: <problem>", e.g.
"job.yaml:4:8: workers.min: expected an integer, got 'two'" (no position for a dict).
"""

import datetime
import os
import re
from typing import Any, Iterable, List, Mapping, Optional, Tuple, Union

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message

from baton._errors import FailedPrecondition, InvalidArgument, NotFound
from baton.v1 import job_pb2

FD = _descriptor.FieldDescriptor

_INT_RANGES = {
    FD.TYPE_INT32: (-(2 ** 31), 2 ** 31 - 1),
    FD.TYPE_SINT32: (-(2 ** 31), 2 ** 31 - 1),
    FD.TYPE_SFIXED32: (-(2 ** 31), 2 ** 31 - 1),
    FD.TYPE_INT64: (-(2 ** 63), 2 ** 63 - 1),
    FD.TYPE_SINT64: (-(2 ** 63), 2 ** 63 - 1),
    FD.TYPE_SFIXED64: (-(2 ** 63), 2 ** 63 - 1),
    FD.TYPE_UINT32: (0, 2 ** 32 - 1),
    FD.TYPE_FIXED32: (0, 2 ** 32 - 1),
    FD.TYPE_UINT64: (0, 2 ** 64 - 1),
    FD.TYPE_FIXED64: (0, 2 ** 64 - 1),
}

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|ms|s|m|h)")


class _Scalar(str):
    """A YAML scalar's text as written, with whether it was plain (unquoted) and where."""

    plain: bool = True
    where: str = ""


class _Source:
    """Names the input in errors: a file (with positions) or "<spec>"."""

    def __init__(self, name: str) -> None:
        self.name = name

    def error(self, node: Any, path: str, problem: str) -> InvalidArgument:
        where = getattr(node, "where", "") or self.name
        message = "%s: %s: %s" % (where, path, problem) if path else "%s: %s" % (where, problem)
        return InvalidArgument(message, field=path)


# ---------------------------------------------------------------------------------------
# YAML (PyYAML's node tree, so scalars keep their text, quoting and position).
# ---------------------------------------------------------------------------------------

def _yaml():
    try:
        import yaml
    except ImportError:
        raise FailedPrecondition("job files need PyYAML (apt-get install python3-yaml, or "
                                 "pip install PyYAML)") from None
    return yaml


def _from_node(node: Any, name: str, positions: bool = True) -> Any:
    """A PyYAML node as dicts, lists and _Scalar (None for a plain null); errors name
    `name` with the node's line and column when `positions`."""
    yaml = _yaml()
    where = name
    if positions:
        where = "%s:%d:%d" % (name, node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            key = _from_node(key_node, name, positions)
            if not isinstance(key, str):
                raise InvalidArgument("%s: expected a scalar key" % where)
            if key in out:
                raise InvalidArgument("%s: %s: repeated key" % (key.where, key))
            out[key] = _from_node(value_node, name, positions)
        return _located(out, where)
    if isinstance(node, yaml.SequenceNode):
        return _located([_from_node(n, name, positions) for n in node.value], where)
    if node.style is None and node.tag == "tag:yaml.org,2002:null":
        return None
    scalar = _Scalar(node.value)
    scalar.plain = node.style is None
    scalar.where = where
    return scalar


class _Dict(dict):
    where = ""


class _List(list):
    where = ""


def _located(value: Any, where: str) -> Any:
    out = _Dict(value) if isinstance(value, dict) else _List(value)
    out.where = where
    return out


def _load_yaml(text: str, name: str, positions: bool = True) -> Any:
    yaml = _yaml()
    try:
        nodes = list(yaml.compose_all(text))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = "%s:%d:%d" % (name, mark.line + 1, mark.column + 1) if mark else name
        problem = (getattr(e, "problem", None) or str(e)).split("\n")[0]
        raise InvalidArgument("%s: invalid YAML: %s" % (where, problem)) from None
    if len(nodes) > 1:
        raise InvalidArgument("%s: holds %d YAML documents; expected exactly one"
                              % (name, len(nodes)))
    return _from_node(nodes[0], name, positions) if nodes else None


# ---------------------------------------------------------------------------------------
# Values -> message fields.
# ---------------------------------------------------------------------------------------

def _describe(value: Any) -> str:
    if isinstance(value, _Scalar):
        return "'%s'" % value
    return repr(value)


def _parse_duration(text: str) -> Optional[Tuple[int, int]]:
    """(seconds, nanos) of "1h30m", "-2.5s", "0"; None if it is not a duration."""
    s = text.strip()
    negative = s.startswith("-")
    if s[:1] in "+-":
        s = s[1:]
    if s == "0":
        return 0, 0
    if not s:
        return None
    pos, total_ns = 0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m:
            return None
        total_ns += round(float(m.group(1)) * _DURATION_UNITS[m.group(2)] * 1e9)
        pos = m.end()
    if negative:
        total_ns = -total_ns
    seconds = -((-total_ns) // 10 ** 9) if total_ns < 0 else total_ns // 10 ** 9
    return seconds, total_ns - seconds * 10 ** 9


def _set_well_known(msg: _message.Message, value: Any, path: str, src: _Source) -> bool:
    """Fills a Duration or Timestamp; False for other message types."""
    full = msg.DESCRIPTOR.full_name
    if full == "google.protobuf.Duration":
        if isinstance(value, datetime.timedelta):
            msg.FromTimedelta(value)
            return True
        parsed = _parse_duration(value) if isinstance(value, str) else None
        if parsed is None:
            raise src.error(value, path, "expected a duration such as 90s, 1h30m or 250ms, "
                                         "got %s" % _describe(value))
        msg.seconds, msg.nanos = parsed
        return True
    if full == "google.protobuf.Timestamp":
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                raise src.error(value, path, "a datetime needs a time zone (tzinfo)")
            msg.FromDatetime(value.astimezone(datetime.timezone.utc).replace(tzinfo=None))
            return True
        try:
            if not isinstance(value, str):
                raise ValueError
            msg.FromJsonString(str(value))
        except ValueError:
            raise src.error(value, path, "expected an RFC 3339 time such as "
                                         "2024-05-01T12:00:00Z, got %s" % _describe(value)) from None
        return True
    return False


def _scalar(field: FD, value: Any, path: str, src: _Source) -> Any:
    """`value` converted for a scalar (non-message) field."""
    t = field.type
    if t in _INT_RANGES:
        if isinstance(value, _Scalar):
            if not value.plain or not re.fullmatch(r"[-+]?\d+", value):
                raise src.error(value, path, "expected an integer, got %s" % _describe(value))
            number = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise src.error(value, path, "expected an integer, got %s" % _describe(value))
        low, high = _INT_RANGES[t]
        if not low <= number <= high:
            raise src.error(value, path, "%d is out of range [%d, %d]" % (number, low, high))
        return number
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        if isinstance(value, _Scalar):
            special = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"),
                       ".nan": float("nan")}
            if value.plain and value.lower() in special:
                return special[value.lower()]
            try:
                if not value.plain:
                    raise ValueError
                return float(value)
            except ValueError:
                raise src.error(value, path, "expected a number, got %s"
                                % _describe(value)) from None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise src.error(value, path, "expected a number, got %s" % _describe(value))
    if t == FD.TYPE_BOOL:
        if isinstance(value, _Scalar) and value.plain and value in ("true", "false", "True",
                                                                      "False"):
            return value.lower() == "true"
        if isinstance(value, bool):
            return value
        raise src.error(value, path, "expected true or false, got %s" % _describe(value))
    if t == FD.TYPE_STRING:
        if isinstance(value, str):
            return str(value)
        if isinstance(value, int) and not isinstance(value, bool):  # as YAML's `key: 100`
            return str(value)
        raise src.error(value, path, "expected a string, got %s" % _describe(value))
    if t == FD.TYPE_BYTES:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str):
            return str(value).encode("utf-8")
        raise src.error(value, path, "expected bytes or a string, got %s" % _describe(value))
    if t == FD.TYPE_ENUM:
        enum = field.enum_type
        if isinstance(value, str) and str(value) in enum.values_by_name:
            return enum.values_by_name[str(value)].number
        if (isinstance(value, int) and not isinstance(value, bool)
                and value in enum.values_by_number):
            return value
        raise src.error(value, path, "expected one of %s, got %s"
                        % (", ".join(v.name for v in enum.values), _describe(value)))
    raise src.error(value, path, "unsupported field type %d" % t)


def _fill(msg: _message.Message, value: Any, path: str, src: _Source) -> None:
    """Merges `value` (a mapping, or a message of the same type) into `msg`."""
    if isinstance(value, _message.Message):
        if value.DESCRIPTOR.full_name != msg.DESCRIPTOR.full_name:
            raise src.error(value, path, "expected a %s message, got %s" % (
                msg.DESCRIPTOR.name, value.DESCRIPTOR.full_name))
        msg.MergeFrom(value)
        return
    if value is not None and _set_well_known(msg, value, path, src):
        return
    if value is None:
        msg.SetInParent()
        return
    if not isinstance(value, Mapping):
        raise src.error(value, path, "expected a mapping of %s fields, got %s"
                        % (msg.DESCRIPTOR.name, _describe(value)))
    msg.SetInParent()
    oneofs = {}
    for key, item in value.items():
        sub = "%s.%s" % (path, key) if path else str(key)
        field = msg.DESCRIPTOR.fields_by_name.get(str(key)) if isinstance(key, str) else None
        if field is None:
            raise src.error(key, sub, "unknown field (%s has: %s)" % (
                msg.DESCRIPTOR.name, ", ".join(f.name for f in msg.DESCRIPTOR.fields)))
        if field.containing_oneof is not None and item is not None:
            other = oneofs.get(field.containing_oneof.name)
            if other is not None:
                raise src.error(key, sub, "only one of %s and %s may be set" % (other, key))
            oneofs[field.containing_oneof.name] = str(key)
        _set_field(msg, field, item, sub, src)


def _set_field(msg: _message.Message, field: FD, value: Any, path: str, src: _Source) -> None:
    is_map = (field.type == FD.TYPE_MESSAGE and field.message_type.has_options
              and field.message_type.GetOptions().map_entry)
    if is_map:
        if value is None:
            return
        if not isinstance(value, Mapping):
            raise src.error(value, path, "expected a mapping, got %s" % _describe(value))
        target = getattr(msg, field.name)
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        for k, v in value.items():
            sub = "%s.%s" % (path, k)
            key = _scalar(key_field, k if not isinstance(k, int) or key_field.type
                          in _INT_RANGES else str(k), sub, src)
            if value_field.type == FD.TYPE_MESSAGE:
                _fill(target[key], v, sub, src)
            else:
                if v is None:
                    raise src.error(v, sub, "expected a value, got null")
                target[key] = _scalar(value_field, v, sub, src)
        return
    if field.label == FD.LABEL_REPEATED:
        if value is None:
            return
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise src.error(value, path, "expected a list, got %s" % _describe(value))
        target = getattr(msg, field.name)
        for i, item in enumerate(value):
            sub = "%s[%d]" % (path, i)
            if field.type == FD.TYPE_MESSAGE:
                _fill(target.add(), item, sub, src)
            else:
                if item is None:
                    raise src.error(item, sub, "expected a value, got null")
                target.append(_scalar(field, item, sub, src))
        return
    if field.type == FD.TYPE_MESSAGE:
        _fill(getattr(msg, field.name), value, path, src)
        return
    if value is None:
        return
    setattr(msg, field.name, _scalar(field, value, path, src))


# ---------------------------------------------------------------------------------------
# Overrides and paths.
# ---------------------------------------------------------------------------------------

def _apply_overrides(root: Any, overrides: Any, src_name: str) -> Any:
    """Sets each dotted PATH of `overrides` in the tree `root` (a mapping, or None)."""
    if isinstance(overrides, Mapping):
        items: List[Tuple[str, Any, str]] = [(str(k), v, "override %s" % k)
                                             for k, v in overrides.items()]
    else:
        if isinstance(overrides, (str, bytes)):
            raise TypeError("overrides must be a mapping or a list of 'PATH=VALUE' strings")
        items = []
        for arg in overrides:
            path, eq, text = str(arg).partition("=")
            if not eq or not path:
                raise InvalidArgument("override %s: expected PATH=VALUE, e.g. workers.min=2"
                                      % arg)
            items.append((path, _load_yaml(text, "override %s" % arg, False) if text else None,
                          "override %s" % arg))
    if root is None:
        root = {}
    if not isinstance(root, Mapping):
        raise InvalidArgument("%s: expected a mapping of JobSpec fields at the top level"
                              % src_name)
    root = _copy_tree(root)
    for path, value, name in items:
        keys = path.split(".")
        if any(not k for k in keys):
            raise InvalidArgument("%s: '%s' is not a field path" % (name, path))
        # Check the path and value on their own first, so errors name the override.
        probe: Any = value
        for key in reversed(keys):
            probe = {key: probe}
        _fill(job_pb2.JobSpec(), probe, "", _Source(name))
        cursor = root
        for key in keys[:-1]:
            if not isinstance(cursor.get(key), dict):
                cursor[key] = {}
            cursor = cursor[key]
        cursor[keys[-1]] = value
    return root


def _copy_tree(value: Any) -> Any:
    """Copies the dicts of a tree (leaving lists, scalars and messages shared)."""
    if isinstance(value, Mapping) and not isinstance(value, _message.Message):
        out = _Dict((k, _copy_tree(v)) for k, v in value.items())
        out.where = getattr(value, "where", "")
        return out
    return value


def _resolve(base: str, path: str) -> str:
    if not path:
        return path
    joined = path if path.startswith("/") else os.path.join(base, path)
    parts: List[str] = []
    for part in joined.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def _resolve_paths(spec: job_pb2.JobSpec, base_dir: str) -> None:
    base = _resolve(os.getcwd(), base_dir or ".")
    if spec.HasField("trainer"):
        spec.trainer.data_dir = _resolve(base, spec.trainer.data_dir)
    if spec.HasField("command"):
        spec.command.working_dir = _resolve(base, spec.command.working_dir)
    spec.checkpoint_dir = _resolve(base, spec.checkpoint_dir)


# ---------------------------------------------------------------------------------------
# Entry points.
# ---------------------------------------------------------------------------------------

SpecLike = Union[Mapping[str, Any], "job_pb2.JobSpec", str, "os.PathLike[str]"]


def spec_from_dict(spec: Mapping[str, Any], overrides: Any = None, base_dir: str = "",
                   source_name: str = "<spec>") -> job_pb2.JobSpec:
    """A JobSpec from a dict in the job file's structure; relative paths against
    `base_dir` (default: the current directory). Raises InvalidArgument."""
    tree = _apply_overrides(spec, overrides, source_name) if overrides else spec
    if not isinstance(tree, Mapping):
        raise InvalidArgument("%s: expected a mapping of JobSpec fields at the top level, "
                              "got %s" % (source_name, type(tree).__name__))
    out = job_pb2.JobSpec()
    _fill(out, tree, "", _Source(source_name))
    _resolve_paths(out, base_dir)
    return out


def load_job_file(path: Union[str, "os.PathLike[str]"], overrides: Any = None) -> job_pb2.JobSpec:
    """The JobSpec of a job YAML file, as `baton submit FILE --set ...` reads it.

    Relative paths inside (and in overrides) are resolved against the file's directory.
    Raises InvalidArgument ("FILE:line:col: field.path: problem"), NotFound (no such file)
    or FailedPrecondition (another I/O error).
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise NotFound("cannot read %s: no such file" % name) from None
    except IsADirectoryError:
        raise FailedPrecondition("cannot read %s: is a directory" % name) from None
    except (OSError, UnicodeDecodeError) as e:
        raise FailedPrecondition("cannot read %s: %s" % (name, e)) from None
    tree = _load_yaml(text, name)
    if tree is None and not overrides:
        raise InvalidArgument("%s: is empty; expected a mapping with name, trainer or "
                              "command, workers, ..." % name)
    if tree is not None and not isinstance(tree, Mapping):
        raise InvalidArgument("%s: expected a mapping of JobSpec fields at the top level"
                              % getattr(tree, "where", name))
    return spec_from_dict(tree, overrides, os.path.dirname(name) or ".", name)


def to_job_spec(spec: SpecLike, overrides: Any = None) -> job_pb2.JobSpec:
    """Any accepted spec form as a JobSpec (see baton.client.Client.submit)."""
    if isinstance(spec, job_pb2.JobSpec):
        if overrides:
            raise TypeError("overrides apply to a dict or a job file, not to a JobSpec message "
                            "(change the message instead)")
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_job_file(spec, overrides)
    if isinstance(spec, Mapping):
        return spec_from_dict(spec, overrides)
    raise TypeError("spec must be a dict, a JobSpec or a path to a job YAML file, not %s"
                    % type(spec).__name__)
