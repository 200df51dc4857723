"""Reading rendered Kubernetes manifests: the objects by kind and name, label selectors,
quantities and durations, a container's flags and mounts. Shared by the checks of
deploy/k8s/checks (policy_check.py, ha_policy.py, netpol_nft.py).
"""
import re

UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
         "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def quantity(q):
    """Bytes of a Kubernetes quantity such as 16Gi or 512M."""
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q))
    if not m or (m.group(2) and m.group(2) not in UNITS):
        raise ValueError("bad quantity %r" % q)
    return float(m.group(1)) * UNITS.get(m.group(2), 1)


def duration_seconds(d):
    total = 0.0
    for value, unit in re.findall(r"([0-9.]+)(ms|s|m|h)", d):
        total += float(value) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def args_of(container):
    out = {}
    for arg in container.get("args", []):
        name, _, value = arg.lstrip("-").partition("=")
        out[name] = value
    return out


class Manifests:
    def __init__(self, docs):
        self.docs = [d for d in docs if d]
        self.by_kind = {}
        for d in self.docs:
            self.by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d

    def get(self, kind, name):
        return self.by_kind.get(kind, {}).get(name)

    def all(self, kind):
        return list(self.by_kind.get(kind, {}).values())

    def workloads(self):
        return [d for d in self.docs if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet")]


def selects(selector, labels):
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions", []):
        present = e["key"] in labels
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
        if e["operator"] == "NotIn" and labels.get(e["key"]) in e["values"]:
            return False
        if e["operator"] == "Exists" and not present:
            return False
        if e["operator"] == "DoesNotExist" and present:
            return False
    return True


def container(workload):
    return workload["spec"]["template"]["spec"]["containers"][0]


def volume_of(pod_spec, mount_path):
    c = pod_spec["containers"][0]
    for mount in c.get("volumeMounts", []):
        if mount["mountPath"] == mount_path:
            return next((v for v in pod_spec.get("volumes", []) if v["name"] == mount["name"]),
                        None)
    return None


def mounted_under(c, path):
    return any(path == mp or path.startswith(mp.rstrip("/") + "/")
               for mp in (m["mountPath"] for m in c.get("volumeMounts", [])))
