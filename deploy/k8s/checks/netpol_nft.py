"""The ingress NetworkPolicies of a rendered overlay as nftables rules for one pod, so that
tests running pods as network namespaces (tests/multihost/k8s_pods_test.sh) enforce what a
NetworkPolicy-enforcing network plugin would.

    netpol_nft.py RENDERED.yaml POD PEERS.json [NODE_IP]

PEERS.json: {"<pod or host name>": {"ip": "198.18.0.1", "namespace": "baton",
"labels": {...}}, ...} (namespaces are labelled kubernetes.io/metadata.name=<name>, as
Kubernetes does). Prints an nft script for the table `netpol`: traffic to POD is refused
(TCP reset, so tests see it at once) unless a policy selecting POD admits its source and
port; replies and loopback pass, and so does NODE_IP, the node the pod runs on: traffic
from the node (the kubelet's probes) is always allowed, whatever the policies. Only what Baton's policies use is supported: pod and
namespace selectors, TCP ports with endPort, rules without `from` (any source).
"""
import json
import sys

import yaml

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from policy_check import selects  # noqa: E402


def admitted(policies, pod, peers):
    """[(source ips or None for any, [(lo, hi)])] admitted into `pod`."""
    me = peers[pod]
    out = []
    for p in policies:
        if p["metadata"].get("namespace", "baton") != me["namespace"]:
            continue
        if not selects(p["spec"]["podSelector"], me["labels"]):
            continue
        for rule in p["spec"].get("ingress", []):
            ports = [(q["port"], q.get("endPort", q["port"])) for q in rule.get("ports", [])]
            if any(q.get("protocol", "TCP") != "TCP" for q in rule.get("ports", [])):
                raise SystemExit("only TCP ports are supported")
            if "from" not in rule:
                out.append((None, ports))
                continue
            ips = []
            for f in rule["from"]:
                if "ipBlock" in f:
                    raise SystemExit("ipBlock is not supported")
                for peer in peers.values():
                    ns_labels = {"kubernetes.io/metadata.name": peer["namespace"]}
                    if "namespaceSelector" in f:
                        ok = selects(f["namespaceSelector"], ns_labels)
                    else:
                        ok = peer["namespace"] == me["namespace"]
                    if ok and selects(f.get("podSelector", {}), peer["labels"]):
                        ips.append(peer["ip"])
            out.append((sorted(set(ips)), ports))
    return out


def nft(rules, node_ip=None):
    lines = ["table inet netpol {", "  chain input {",
             "    type filter hook input priority 0; policy accept;",
             "    iif lo accept", "    ct state established,related accept"]
    if node_ip:
        lines.append("    ip saddr %s accept" % node_ip)
    for ips, ports in rules:
        if ips == []:
            continue
        src = "" if ips is None else "ip saddr { %s } " % ", ".join(ips)
        dports = ", ".join(str(lo) if lo == hi else "%d-%d" % (lo, hi) for lo, hi in ports)
        lines.append("    %stcp dport { %s } accept" % (src, dports) if ports
                     else "    %saccept" % src)
    lines += ["    meta l4proto tcp reject with tcp reset", "    drop", "  }", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        policies = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "NetworkPolicy"]
    with open(sys.argv[3]) as f:
        peers = json.load(f)
    sys.stdout.write(nft(admitted(policies, sys.argv[2], peers),
                         sys.argv[4] if len(sys.argv) == 5 else None))
