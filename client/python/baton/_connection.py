"""Where baton.client connects and as whom, resolved as the `baton` CLI does.

The same rules as client/config/connection.{h,cc}; the config file is the CLI's (YAML;
$BATON_CONFIG, else $XDG_CONFIG_HOME/baton/config.yaml, else ~/.config/baton/config.yaml;
tools/certs.sh writes one):

    current_context: alice
    contexts:
      alice:
        coordinator: baton.example.com:7070
        ca: /etc/baton/ca.crt          # the CA the coordinator's certificate chains to
        token_file: ~/.baton/alice.token
      local:
        coordinator: 127.0.0.1:7070
        insecure: true                 # plaintext: loopback addresses only

Precedence, per field: argument > environment (BATON_COORDINATOR, BATON_CONTEXT,
BATON_TOKEN, BATON_INSECURE=1|true) > the selected context > default (localhost:7070).
The context is the `context` argument, else BATON_CONTEXT, else current_context.

The coordinator, wherever it comes from, is one address or the addresses of its replicas
(a comma-separated string, or a list as the argument): "host:port", "[v6]:port",
"dns:///host:port" or "unix:/path" each (parse_addresses; ParseCoordinatorAddresses in
common/net/coordinator_addresses.h has the same rules).
Standard library only, plus PyYAML when a config file is read.
"""

import dataclasses
import ipaddress
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from baton._errors import FailedPrecondition, InvalidArgument

DEFAULT_COORDINATOR = "localhost:7070"

_CONTEXT_KEYS = ("coordinator", "ca", "token_file", "insecure")


@dataclasses.dataclass(frozen=True)
class Connection:
    """A resolved connection. `token` is the bearer token itself ("" = none).

    `coordinator` is the address as given (one, or a comma-separated list);
    `coordinators` its addresses in order (at least one)."""

    coordinator: str
    insecure: bool = False
    ca: str = ""  # PEM file; set unless insecure
    token: str = dataclasses.field(default="", repr=False)
    context: str = ""  # the context used; "" if none
    coordinators: Tuple[str, ...] = ()


_ALLOWED = ("allowed: HOST:PORT, [IPV6]:PORT or unix:PATH with PORT in 1..65535; several "
            "separated by commas, each once")


def _entry_problem(entry: str) -> Optional[str]:
    """What is wrong with one trimmed, non-empty address; None if nothing."""
    for scheme in ("unix:", "unix-abstract:"):
        if entry.startswith(scheme):
            return "has no path" if entry == scheme else None
    rest = entry[len("dns:///"):] if entry.startswith("dns:///") else entry
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            return "has an unclosed '['"
        host, after = rest[1:close], rest[close + 1:]
        if not after.startswith(":"):
            return "has no port"
        port = after[1:]
    else:
        colon = rest.rfind(":")
        if colon < 0:
            return "has no port"
        host, port = rest[:colon], rest[colon + 1:]
        if ":" in host:
            return "is an IPv6 address without brackets (write [::1]:7070)"
    if not host:
        return "has no host"
    if not port:
        return "has no port"
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        return "has port '%s', not one in 1..65535" % port
    return None


def parse_addresses(addresses: Union[str, Sequence[str]]) -> List[str]:
    """The coordinator addresses of a comma-separated string (or of a list of them), in
    order, whitespace around each trimmed.

    Raises InvalidArgument naming the entry and what is allowed: an empty list or entry,
    a missing host or port, a port outside 1..65535, an unbracketed IPv6 address, a
    duplicate.
    """
    text = addresses if isinstance(addresses, str) else ",".join(addresses)
    if not text.strip():
        raise InvalidArgument("no coordinator address given (%s)" % _ALLOWED)
    out: List[str] = []
    for piece in text.split(","):
        entry = piece.strip()
        if not entry:
            raise InvalidArgument("coordinator address list '%s' has an empty entry (%s)"
                                  % (text, _ALLOWED))
        problem = _entry_problem(entry)
        if problem is None and entry in out:
            problem = "is listed twice"
        if problem is not None:
            raise InvalidArgument("coordinator address '%s' %s (%s)" % (entry, problem, _ALLOWED))
        out.append(entry)
    return out


def host_of_address(address: str) -> str:
    """The host of "host:port", "[v6]:port" or "dns:///host:port" (HostOfAddress)."""
    s = address
    if s.startswith("dns:///"):
        s = s[len("dns:///"):]
    if s.startswith("["):
        close = s.find("]")
        return s[1:] if close < 0 else s[1:close]
    colon = s.rfind(":")
    return s if colon < 0 else s[:colon]


def is_loopback(address: str) -> bool:
    """True for unix: sockets, localhost, 127.0.0.0/8 and ::1 (CheckLoopbackOnly)."""
    if address.startswith("unix:"):
        return True
    host = host_of_address(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise FailedPrecondition("cannot read %s %s: %s" % (what, path, e.strerror)) from None


def _expand_home(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return path


def _parse_context(node: Any, where: str) -> Dict[str, Any]:
    if not isinstance(node, dict):
        raise InvalidArgument("%s: must be a map" % where)
    context: Dict[str, Any] = {"coordinator": "", "ca": "", "token_file": "", "insecure": False}
    for key, value in node.items():
        key = str(key)
        if key not in _CONTEXT_KEYS:
            raise InvalidArgument("%s: unknown field '%s' (allowed: %s)"
                                  % (where, key, ", ".join(_CONTEXT_KEYS)))
        if isinstance(value, (dict, list)):
            raise InvalidArgument("%s.%s: must be a value" % (where, key))
        if key == "insecure":
            if value not in (True, False, "true", "false"):
                raise InvalidArgument("%s.insecure: must be true or false, got '%s'"
                                      % (where, value))
            context[key] = value in (True, "true")
        else:
            context[key] = "" if value is None else str(value)
    return context


def parse_config(text: str, origin: str) -> Dict[str, Any]:
    """Parses a config file's text into {"current_context": str, "contexts": {name: {...}}}.

    Raises InvalidArgument naming `origin`, the context and the field (unknown keys are
    errors, so a typo never silently means "no TLS").
    """
    try:
        import yaml
    except ImportError:
        raise FailedPrecondition("reading %s needs PyYAML (apt-get install python3-yaml, or "
                                 "pip install PyYAML)" % origin) from None
    try:
        root = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidArgument("%s: not YAML: %s" % (origin, e)) from None
    config: Dict[str, Any] = {"current_context": "", "contexts": {}}
    if root is None:
        return config
    if not isinstance(root, dict):
        raise InvalidArgument("%s: must be a map" % origin)
    for key, value in root.items():
        if key == "current_context":
            config["current_context"] = "" if value is None else str(value)
        elif key == "contexts":
            if value is None:
                continue
            if not isinstance(value, dict):
                raise InvalidArgument("%s: contexts must be a map" % origin)
            for name, node in value.items():
                config["contexts"][str(name)] = _parse_context(
                    node, "%s: contexts.%s" % (origin, name))
        else:
            raise InvalidArgument("%s: unknown field '%s' (allowed: current_context, contexts)"
                                  % (origin, key))
    return config


def _load_config(environ: Mapping[str, str]) -> Dict[str, Any]:
    path = environ.get("BATON_CONFIG", "")
    explicit = bool(path)
    if not path and environ.get("XDG_CONFIG_HOME"):
        path = os.path.join(environ["XDG_CONFIG_HOME"], "baton", "config.yaml")
    if not path and environ.get("HOME"):
        path = os.path.join(environ["HOME"], ".config", "baton", "config.yaml")
    if not path or (not explicit and not os.path.exists(path)):
        return {"current_context": "", "contexts": {}}
    return parse_config(_read(path, "BATON_CONFIG" if explicit else "config"), path)


def resolve_connection(coordinator: Union[None, str, Sequence[str]] = None, *,
                       context: Optional[str] = None,
                       ca: Optional[str] = None, token: Optional[str] = None,
                       token_file: Optional[str] = None, insecure: bool = False,
                       environ: Optional[Mapping[str, str]] = None) -> Connection:
    """Resolves a Connection from arguments, the environment and the config file.

    `coordinator` is one address, a comma-separated string of several or a list of
    them. `environ` defaults to os.environ. The token is `token`, else the contents of
    `token_file`, else BATON_TOKEN, else the context's token_file (whitespace stripped;
    "~/" expands to $HOME in ca and token_file).

    Raises InvalidArgument for an unknown context, a malformed config file or address
    list (naming where it came from), or insecure (plaintext) to an address that is not
    loopback; FailedPrecondition for a file that cannot be read or TLS without a CA.
    """
    env = os.environ if environ is None else environ
    home = env.get("HOME", "")
    config = _load_config(env)
    name = context or env.get("BATON_CONTEXT", "") or config["current_context"]
    selected = {"coordinator": "", "ca": "", "token_file": "", "insecure": False}
    if name:
        if name not in config["contexts"]:
            raise InvalidArgument(
                "no context '%s' in the config file (context=, BATON_CONTEXT or "
                "current_context; tools/certs.sh writes contexts)" % name)
        selected = config["contexts"][name]
    if coordinator:
        origin = "coordinator="
        address = coordinator if isinstance(coordinator, str) else ",".join(coordinator)
    elif env.get("BATON_COORDINATOR"):
        origin, address = "BATON_COORDINATOR", env["BATON_COORDINATOR"]
    elif selected["coordinator"]:
        origin, address = "context '%s' coordinator" % name, selected["coordinator"]
    else:
        origin, address = "the default coordinator", DEFAULT_COORDINATOR
    try:
        addresses = tuple(parse_addresses(address))
    except InvalidArgument as e:
        raise InvalidArgument("%s: %s" % (origin, e)) from None
    plaintext = (bool(insecure) or env.get("BATON_INSECURE", "") in ("1", "true")
                 or selected["insecure"])
    if token:
        secret = token
    elif token_file:
        secret = _read(_expand_home(token_file, home), "the token file").strip()
    elif env.get("BATON_TOKEN"):
        secret = env["BATON_TOKEN"]
    elif selected["token_file"]:
        secret = _read(_expand_home(selected["token_file"], home), "the token file").strip()
    else:
        secret = ""
    if plaintext:
        for one in addresses:
            if not is_loopback(one):
                raise InvalidArgument(
                    "insecure (plaintext) is only allowed on loopback addresses, and the "
                    "coordinator address is %s: use TLS (tools/certs.sh makes a CA, "
                    "certificates and tokens) or a 127.0.0.1/[::1]/localhost address" % one)
        return Connection(address, True, "", secret, name, addresses)
    ca_path = _expand_home(ca or selected["ca"], home)
    if not ca_path:
        raise FailedPrecondition(
            "no CA certificate to check the coordinator with: choose a context (context=, "
            "BATON_CONTEXT; tools/certs.sh writes config.yaml), pass ca=, or insecure=True "
            "for a plaintext coordinator on a loopback address")
    return Connection(address, False, ca_path, secret, name, addresses)


def read_ca(path: str) -> bytes:
    """The PEM bytes of the CA file; FailedPrecondition if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise FailedPrecondition("cannot read the CA certificate %s: %s"
                                 % (path, e.strerror)) from None
