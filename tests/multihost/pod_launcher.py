"""Writes the script that runs one pod the way a kubelet would, inside a host of
cluster.sh (tests/multihost/k8s_pods_test.sh), from deploy/k8s/checks/pod_spec.py's JSON.

    pod_launcher.py SPEC.json STATE_DIR IMAGE_DIR HOSTS_LINE > run-pod.sh
    unshare --mount --uts --propagation private bash run-pod.sh   (as root, inside the host)

The script, in the pod's own mount namespace: lays the pod's volumes at their mountPaths
(emptyDirs, memory-backed ones as a tmpfs of their sizeLimit; Secrets and csi volumes
from STATE_DIR/secrets/<name> and STATE_DIR/csi/<pod>, read-only; claims from
STATE_DIR/pvc/<claim>), the image's binaries at /usr/local/bin (IMAGE_DIR), HOSTS_LINE in
/etc/hosts (the Services' DNS names), the pod's hostname; makes the root file system
read-only when the container asks for it; then execs the container's command as its
runAsUser/runAsGroup with fsGroup as a supplementary group, no capabilities (bounding set
cleared) and no_new_privs (allowPrivilegeEscalation: false), with only the container's
environment (and the image's PATH).
"""
import json
import os
import shlex
import sys

IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def main(spec_path, state, image, hosts_line):
    spec = json.load(open(spec_path))
    pod = spec["name"]
    q = shlex.quote
    scratch = os.path.join(state, "pods", pod, "scratch")
    out = ["set -euo pipefail", "mkdir -p %s" % q(scratch),
           # Upper layers of the overlays below, private to this mount namespace.
           "mount -t tmpfs -o size=64m tmpfs %s" % q(scratch)]
    # A directory a volume is mounted on may not exist here: make it in a writable overlay
    # of its nearest existing ancestor (never in the real file system).
    overlays = []
    targets = [m["mountPath"] for m in spec["mounts"]] + ["/etc/hosts", "/usr/local/bin"]
    for target in targets:
        parent = os.path.dirname(target)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if (not os.path.exists(target) or target == "/etc/hosts") and parent not in overlays:
            overlays.append(parent)
    for i, parent in enumerate(overlays):
        out.append("mkdir -p %s/u%d %s/w%d" % (q(scratch), i, q(scratch), i))
        out.append("mount -t overlay overlay -o lowerdir=%s,upperdir=%s/u%d,workdir=%s/w%d %s"
                   % (q(parent), q(scratch), i, q(scratch), i, q(parent)))
    out.append("echo %s >>/etc/hosts" % q(hosts_line))
    out.append("hostname %s" % q(pod))
    fs_group = spec["fs_group"]
    for m in spec["mounts"]:
        v, path = m["volume"], m["mountPath"]
        out.append("mkdir -p %s" % q(path))
        if v["kind"] == "emptyDir" and v["medium"] == "Memory":
            size = v["sizeLimit"].replace("Gi", "g").replace("Mi", "m") or "64m"
            out.append("mount -t tmpfs -o size=%s,mode=1777 tmpfs %s" % (size, q(path)))
            continue
        if v["kind"] == "emptyDir":
            src = os.path.join(state, "pods", pod, "volumes", m["name"])
            out.append("mkdir -p %s && chmod 0777 %s" % (q(src), q(src)))
        elif v["kind"] == "secret":
            src = os.path.join(state, "secrets", v["secretName"])
        elif v["kind"] == "csi":
            src = os.path.join(state, "csi", pod)
        elif v["kind"] == "pvc":
            src = os.path.join(state, "pvc", v["claim"])
            # fsGroup: the volume belongs to the pod's group, setgid.
            out.append("mkdir -p %s && chgrp %d %s && chmod 2775 %s"
                       % (q(src), fs_group, q(src), q(src)))
        else:
            raise SystemExit("unsupported volume %s" % v)
        out.append("test -d %s || { echo 'no volume source %s' >&2; exit 1; }" % (q(src), src))
        out.append("mount --bind %s %s" % (q(src), q(path)))
        if m["readOnly"]:
            out.append("mount -o remount,bind,ro %s" % q(path))
    out.append("mount --bind %s /usr/local/bin && mount -o remount,bind,ro /usr/local/bin"
               % q(image))
    if spec["read_only_root"]:
        out.append("mount -o remount,bind,ro /")
        for parent in overlays:
            out.append("mount -o remount,ro %s" % q(parent))
    env = ["PATH=" + IMAGE_PATH, "HOSTNAME=" + pod] + [
        "%s=%s" % kv for kv in spec["env"].items()]
    out.append("exec setpriv --reuid=%d --regid=%d --groups=%d --inh-caps=-all "
               "--bounding-set=-all --no-new-privs -- env -i %s %s"
               % (spec["run_as_user"], spec["run_as_group"], fs_group,
                  " ".join(q(e) for e in env), " ".join(q(a) for a in spec["command"])))
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
