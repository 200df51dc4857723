"""Checks rendered Baton manifests: kinds, namespace, flags that exist, consistent wiring."""
import re
import sys

import yaml


def flags_of(help_path):
    text = open(help_path).read()
    return set(re.findall(r"^\s+--([a-z_]+)", text, re.M))


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def main(rendered, coordinator_help, worker_help):
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    errors = []
    for key in [("Namespace", "baton"), ("Service", "baton-coordinator"),
                ("StatefulSet", "baton-coordinator"), ("DaemonSet", "baton-worker")]:
        if key not in by_kind:
            errors.append("missing %s/%s" % key)
    if errors:
        sys.exit("FAIL: " + "; ".join(errors))
    for d in docs:
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "baton":
            errors.append("%s/%s not in namespace baton" % (d["kind"], d["metadata"]["name"]))

    known = {"baton-coordinator": flags_of(coordinator_help), "baton-worker": flags_of(worker_help)}
    for name, kind in [("baton-coordinator", "StatefulSet"), ("baton-worker", "DaemonSet")]:
        c = container(by_kind[(kind, name)])
        if not c["image"].startswith("baton:"):
            errors.append("%s image %s is not the baton image" % (name, c["image"]))
        for arg in c.get("args", []):
            flag = arg.split("=", 1)[0].lstrip("-")
            if flag not in known[name]:
                errors.append("%s: --%s is not a flag of the binary" % (name, flag))

    service = by_kind[("Service", "baton-coordinator")]
    port = service["spec"]["ports"][0]["port"]
    coord = container(by_kind[("StatefulSet", "baton-coordinator")])
    args = dict(a.lstrip("-").split("=", 1) for a in coord["args"])
    if not args.get("listen", "").endswith(":%d" % port):
        errors.append("coordinator listens on %s, service port is %d" % (args.get("listen"), port))
    mounts = [m["mountPath"] for m in coord.get("volumeMounts", [])]
    if args.get("state_dir") not in mounts:
        errors.append("state_dir %s is not on a mounted volume %s" % (args.get("state_dir"), mounts))
    worker = container(by_kind[("DaemonSet", "baton-worker")])
    wargs = dict(a.lstrip("-").split("=", 1) for a in worker["args"])
    want = "%s:%d" % (service["metadata"]["name"], port)
    if wargs.get("coordinator") != want:
        errors.append("worker dials %s, want %s" % (wargs.get("coordinator"), want))
    # TLS material and tokens come from mounted volumes (Secrets, the csi driver).
    for name, c, a in [("baton-coordinator", coord, args), ("baton-worker", worker, wargs)]:
        mounted = [m["mountPath"] for m in c.get("volumeMounts", [])]
        for flag in ("tls_cert", "tls_key", "ca", "token_file"):
            if flag not in a:
                if flag != "token_file" or name == "baton-coordinator":
                    errors.append("%s: no --%s (TLS is required)" % (name, flag))
                continue
            if a[flag].rsplit("/", 1)[0] not in mounted:
                errors.append("%s: --%s=%s is not on a mounted volume" % (name, flag, a[flag]))
        if "insecure" in a:
            errors.append("%s: --insecure in a cluster manifest" % name)
    # Probes speak plaintext: they must use the health-only port, not the TLS one.
    health = args.get("health_listen", "")
    for probe in ("readinessProbe", "livenessProbe"):
        port = coord.get(probe, {}).get("grpc", {}).get("port")
        if not health.endswith(":%s" % port):
            errors.append("coordinator %s probes port %s, --health_listen is %s" % (probe, port, health))
    if errors:
        sys.exit("FAIL: " + "; ".join(errors))
    print("PASS: %d objects; flags and wiring consistent" % len(docs))


if __name__ == "__main__":
    main(*sys.argv[1:4])
