"""What a kubelet would run for one pod of a rendered overlay, as JSON, for tests that start
the real daemons exactly as the manifests say (tests/multihost/k8s_pods_test.sh).

    pod_spec.py RENDERED.yaml STATEFULSET ORDINAL POD_IP DOCKER_DIR

Prints {"name", "command" (the container's command, else its image's ENTRYPOINT from
DOCKER_DIR, + args, $(VAR) expanded from the container's env as the kubelet does), "env" (name -> value; fieldRefs resolved for this pod), "run_as_user",
"run_as_group", "fs_group", "sysctls", "grace_seconds", "labels", "mounts" (mountPath,
readOnly, and the volume: kind emptyDir/secret/pvc/csi with its details, claim names of
volumeClaimTemplates get the pod's ordinal as StatefulSets name them), "probes"}.
Only the features Baton's manifests use are supported; anything else is an error.
"""
import json
import os
import re
import sys

import yaml


def expand(value, env):
    # $(VAR) -> env value; $$(VAR) -> literal $(VAR), as Kubernetes does.
    return re.sub(r"\$?\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: m.group(0)[1:] if m.group(0).startswith("$$")
                  else env.get(m.group(1), m.group(0)), value)


def image_entrypoint(image, docker_dir):
    """The ENTRYPOINT of image `.../baton-NAME:tag@digest`: the exec form in the final stage
    of DOCKER_DIR/NAME.Dockerfile. None if there is no such Dockerfile or entrypoint."""
    name = image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    path = os.path.join(docker_dir, name[len("baton-"):] + ".Dockerfile")
    if not name.startswith("baton-") or not os.path.exists(path):
        return None
    with open(path) as f:
        found = re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", f.read(), re.M)
    return json.loads(found[-1]) if found else None


def pod_spec(docs, statefulset, ordinal, pod_ip, docker_dir):
    sts = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == statefulset)
    name = "%s-%d" % (statefulset, ordinal)
    template = sts["spec"]["template"]
    pod = template["spec"]
    c = pod["containers"][0]
    fields = {"status.podIP": pod_ip, "metadata.name": name,
              "metadata.namespace": sts["metadata"].get("namespace", "default")}
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            raise SystemExit("env %s: unsupported source %s" % (e["name"], e["valueFrom"]))
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])}
    mounts = []
    for m in c.get("volumeMounts", []):
        if m["name"] in claims:
            volume = {"kind": "pvc", "claim": "%s-%s" % (m["name"], name)}
        else:
            v = volumes[m["name"]]
            if "emptyDir" in v:
                volume = {"kind": "emptyDir", "medium": v["emptyDir"].get("medium", ""),
                          "sizeLimit": v["emptyDir"].get("sizeLimit", "")}
            elif "secret" in v:
                volume = {"kind": "secret", "secretName": v["secret"]["secretName"],
                          "defaultMode": v["secret"].get("defaultMode", 0o644)}
            elif "persistentVolumeClaim" in v:
                volume = {"kind": "pvc", "claim": v["persistentVolumeClaim"]["claimName"]}
            elif "csi" in v:
                attrs = {k: v2.replace("${POD_NAME}", name)
                         for k, v2 in v["csi"].get("volumeAttributes", {}).items()}
                volume = {"kind": "csi", "driver": v["csi"]["driver"], "attributes": attrs}
            else:
                raise SystemExit("volume %s: unsupported kind %s" % (v["name"], sorted(v)))
        mounts.append({"mountPath": m["mountPath"], "readOnly": bool(m.get("readOnly")),
                       "name": m["name"], "volume": volume})
    command = c.get("command") or image_entrypoint(c["image"], docker_dir)
    if not command:
        raise SystemExit("container %s: no command and no ENTRYPOINT for image %s"
                         % (c["name"], c["image"]))
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    probes = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe in c:
            p = c[probe]
            if "grpc" in p:
                probes[probe] = {"grpc": p["grpc"]["port"], "service": p["grpc"].get("service", "")}
            elif "httpGet" in p:
                port = p["httpGet"]["port"]
                if isinstance(port, str):
                    port = next(q["containerPort"] for q in c["ports"] if q["name"] == port)
                probes[probe] = {"http": port, "path": p["httpGet"]["path"]}
    return {
        "name": name,
        "command": [expand(a, env) for a in command + c.get("args", [])],
        "env": env,
        "run_as_user": csc.get("runAsUser", psc.get("runAsUser")),
        "run_as_group": csc.get("runAsGroup", psc.get("runAsGroup")),
        "fs_group": psc.get("fsGroup"),
        "sysctls": {s["name"]: s["value"] for s in psc.get("sysctls", [])},
        "grace_seconds": pod.get("terminationGracePeriodSeconds", 30),
        "labels": template["metadata"].get("labels", {}),
        "read_only_root": bool(csc.get("readOnlyRootFilesystem")),
        "mounts": mounts,
        "probes": probes,
    }


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    print(json.dumps(pod_spec(docs, sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]),
                     indent=1))
