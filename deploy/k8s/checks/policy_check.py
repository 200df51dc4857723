"""Policy checks of a rendered Baton overlay (kubectl kustomize deploy/k8s/overlays/X).

    policy_check.py RENDERED.yaml COORDINATOR_HELPFULL WORKER_HELPFULL DOCKER_DIR [ETCD_HELP]

Fails (exit 1, one line per problem) when any of these does not hold:
  * Pod Security "restricted": every container runs as non-root with no privilege
    escalation, all capabilities dropped, seccomp RuntimeDefault, a read-only root file
    system; only the volume types "restricted" allows; no host namespaces; the namespace
    enforces "restricted".
  * Every container has CPU and memory requests and limits, and liveness and readiness
    probes; every Deployment/StatefulSet has a PodDisruptionBudget selecting its pods.
  * Service accounts mount no token; images are pinned by tag and digest.
  * Each container runs its daemon under the image's init: its command, else its image's
    ENTRYPOINT (DOCKER_DIR/NAME.Dockerfile), is tini -- /usr/local/bin/<daemon>.
  * The wiring: flags exist in the binaries, ports and Services agree, TLS material and
    state are on mounted volumes, probes use the plaintext health port, the worker's grace
    period covers its drain, the shared volume is ReadWriteMany and in --allowed_paths,
    /dev/shm is memory-backed and sized from the slots, --snapshot_root a memory-backed
    emptyDir of its own (not below /dev/shm), both within the memory limit, GPUs match
    slots, the rank port range matches the NetworkPolicy, monitors select the metrics ports, the coordinator's
    certificate names what workers dial.
  * Coordinator replicas and etcd (ha_policy.py): several replicas only on etcd, probes
    and update strategy that fit a leader-only Ready pod, etcd's members, TLS, probes,
    volumes, budget and NetworkPolicy; etcd's flags against ETCD_HELP (`etcd --help`),
    required when the render runs etcd.
"""
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k8s_objects import (Manifests, args_of, container, duration_seconds,  # noqa: E402
                         mounted_under, quantity, selects, volume_of)
from pod_spec import image_entrypoint  # noqa: E402
import ha_policy  # noqa: E402

# Pod Security "restricted" allows these volume sources only.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
SHM_PER_CPU_SLOT = 8 << 20   # the shared-memory communicator's segment per local rank
SHM_PER_GPU_SLOT = 2 << 30   # NCCL's intra-node buffers (docs/DEPLOY.md)
DIGEST_IMAGE = re.compile(r"^[^@\s]+:[^@:/\s]+@sha256:[0-9a-f]{64}$")


def flags_of(help_text):
    return set(re.findall(r"^\s+--([a-z_]+)", help_text, re.M))


def check_pod_security(m, errors):
    ns = m.get("Namespace", "baton")
    labels = (ns or {}).get("metadata", {}).get("labels", {})
    if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
        errors.append("Namespace baton does not enforce Pod Security 'restricted'")
    for w in m.workloads():
        name = "%s/%s" % (w["kind"], w["metadata"]["name"])
        pod = w["spec"]["template"]["spec"]
        psc = pod.get("securityContext", {})
        for host in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(host):
                errors.append("%s: %s" % (name, host))
        for v in pod.get("volumes", []):
            kinds = set(v) - {"name"}
            if not kinds <= RESTRICTED_VOLUMES:
                errors.append("%s: volume %s is %s, not allowed by 'restricted'"
                              % (name, v["name"], sorted(kinds)))
        if pod.get("automountServiceAccountToken") is not False:
            errors.append("%s: automountServiceAccountToken is not false" % name)
        sa = m.get("ServiceAccount", pod.get("serviceAccountName", "default"))
        if sa is None or sa.get("automountServiceAccountToken") is not False:
            errors.append("%s: service account %s missing or mounts a token"
                          % (name, pod.get("serviceAccountName", "default")))
        for c in pod.get("initContainers", []) + pod["containers"]:
            where = "%s container %s" % (name, c["name"])
            sc = c.get("securityContext", {})

            def setting(key):
                return sc.get(key, psc.get(key))
            if setting("runAsNonRoot") is not True:
                errors.append("%s: runAsNonRoot is not true" % where)
            if setting("runAsUser") == 0:
                errors.append("%s: runAsUser 0" % where)
            if sc.get("privileged"):
                errors.append("%s: privileged" % where)
            if sc.get("allowPrivilegeEscalation") is not False:
                errors.append("%s: allowPrivilegeEscalation is not false" % where)
            caps = sc.get("capabilities", {})
            if "ALL" not in caps.get("drop", []):
                errors.append("%s: capabilities do not drop ALL" % where)
            if caps.get("add"):
                errors.append("%s: adds capabilities %s" % (where, caps["add"]))
            seccomp = (setting("seccompProfile") or {}).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                errors.append("%s: seccompProfile is %s, not RuntimeDefault" % (where, seccomp))
            if sc.get("readOnlyRootFilesystem") is not True:
                errors.append("%s: readOnlyRootFilesystem is not true" % where)
            if not DIGEST_IMAGE.match(c.get("image", "")):
                errors.append("%s: image %r is not pinned as name:tag@sha256:digest"
                              % (where, c.get("image")))


def check_resources_probes_pdbs(m, errors):
    pdbs = m.all("PodDisruptionBudget")
    for w in m.workloads():
        name = "%s/%s" % (w["kind"], w["metadata"]["name"])
        pod = w["spec"]["template"]
        for c in pod["spec"]["containers"]:
            where = "%s container %s" % (name, c["name"])
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(kind, {}):
                        errors.append("%s: no %s %s" % (where, r, kind))
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in c:
                    errors.append("%s: no %s" % (where, probe))
        if w["kind"] in ("Deployment", "StatefulSet"):
            labels = pod["metadata"].get("labels", {})
            if not any(selects(p["spec"].get("selector", {}), labels) for p in pdbs):
                errors.append("%s: no PodDisruptionBudget selects its pods" % name)


def check_wiring(m, coordinator_flags, worker_flags, docker_dir, etcd_help, errors):
    coord_set = m.get("StatefulSet", "baton-coordinator")
    worker_set = m.get("StatefulSet", "baton-worker")
    service = m.get("Service", "baton-coordinator")
    if not (coord_set and worker_set and service):
        errors.append("missing StatefulSet/baton-coordinator, StatefulSet/baton-worker or "
                      "Service/baton-coordinator")
        return
    if not m.get("Service", coord_set["spec"]["serviceName"]) or m.get(
            "Service", coord_set["spec"]["serviceName"])["spec"].get("clusterIP") != "None":
        errors.append("the coordinator's serviceName is not a headless Service")
    for d in m.docs:
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "baton":
            errors.append("%s/%s not in namespace baton" % (d["kind"], d["metadata"]["name"]))
    coord, worker = container(coord_set), container(worker_set)
    for name, c, known in [("baton-coordinator", coord, coordinator_flags),
                           ("baton-worker", worker, worker_flags)]:
        command = c.get("command") or image_entrypoint(c["image"], docker_dir)
        if command != ["/usr/bin/tini", "--", "/usr/local/bin/" + name]:
            errors.append("%s: runs %s, not tini -- /usr/local/bin/%s (command, else the "
                          "image's ENTRYPOINT)" % (name, command, name))
        for flag in args_of(c):
            if flag not in known:
                errors.append("%s: --%s is not a flag of the binary" % (name, flag))
    args, wargs = args_of(coord), args_of(worker)
    port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    if not args.get("listen", "").endswith(":%d" % port):
        errors.append("coordinator listens on %s, its Service's port is %d"
                      % (args.get("listen"), port))
    # One address: the Service. Several (the replicas): ha_policy.check_replicas.
    dialled = wargs.get("coordinator", "").split(",")
    if len(dialled) == 1 and dialled[0] != "%s:%d" % (service["metadata"]["name"], port):
        errors.append("worker dials %s, not the coordinator's Service" % wargs.get("coordinator"))
    if not mounted_under(coord, args.get("state_dir", "?")):
        errors.append("state_dir %s is not on a mounted volume" % args.get("state_dir"))
    # On SQLite the state is the job history: it must outlive the pod. On etcd --state_dir
    # holds only the replica's points and lines (ha_policy).
    claims = [t["metadata"]["name"] for t in coord_set["spec"].get("volumeClaimTemplates", [])]
    if args.get("store", "sqlite") == "sqlite" and not any(
            mnt["name"] in claims for mnt in coord["volumeMounts"]
            if mnt["mountPath"] == args.get("state_dir")):
        errors.append("state_dir %s is not the StatefulSet's volume claim" % args.get("state_dir"))
    for name, c, a in [("baton-coordinator", coord, args), ("baton-worker", worker, wargs)]:
        for flag in ("tls_cert", "tls_key", "ca") + (("token_file",) if name == "baton-coordinator" else ()):
            if flag not in a:
                errors.append("%s: no --%s (TLS is required)" % (name, flag))
            elif not mounted_under(c, a[flag]):
                errors.append("%s: --%s=%s is not on a mounted volume" % (name, flag, a[flag]))
        if "insecure" in a:
            errors.append("%s: --insecure in a cluster manifest" % name)
    if "queue_file" in args and not mounted_under(coord, args["queue_file"]):
        errors.append("baton-coordinator: --queue_file=%s is not on a mounted volume"
                      % args["queue_file"])
    for name, c, a in [("coordinator", coord, args), ("worker", worker, wargs)]:
        health = a.get("health_listen", "")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            p = c.get(probe, {}).get("grpc", {}).get("port")
            if not health.endswith(":%s" % p):
                errors.append("%s %s probes port %s, --health_listen is %s"
                              % (name, probe, p, health))
    check_worker(m, worker_set, worker, wargs, errors)
    ha_policy.check(m, coord_set, worker_set, service, etcd_help, errors)


def check_worker(m, worker_set, worker, wargs, errors):
    pod = worker_set["spec"]["template"]["spec"]
    grace = pod.get("terminationGracePeriodSeconds", 30)
    need = duration_seconds(wargs.get("drain_timeout", "0s")) + duration_seconds(
        wargs.get("stop_grace", "10s")) + 5
    if grace < need:
        errors.append("worker terminationGracePeriodSeconds %s < drain_timeout + stop_grace + 5s "
                      "(%gs)" % (grace, need))
    anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    if not any(t.get("topologyKey") == "kubernetes.io/hostname" and
               selects(t.get("labelSelector", {}), worker_set["spec"]["template"]["metadata"]["labels"])
               for t in anti):
        errors.append("workers are not kept one per node (required pod anti-affinity by hostname)")
    # The shared volume: ReadWriteMany, mounted, and where jobs may keep checkpoints.
    allowed = [p for p in wargs.get("allowed_paths", "").split(",") if p]
    shared = [mnt for mnt in worker["volumeMounts"] if mnt["mountPath"] in allowed]
    if not shared:
        errors.append("no worker --allowed_paths entry %s is a mounted volume" % allowed)
    for mnt in shared:
        v = next(v for v in pod["volumes"] if v["name"] == mnt["name"])
        claim = m.get("PersistentVolumeClaim", v.get("persistentVolumeClaim", {}).get("claimName"))
        if not claim or "ReadWriteMany" not in claim["spec"]["accessModes"]:
            errors.append("worker volume at %s is not a ReadWriteMany claim" % mnt["mountPath"])
    # Slots, GPUs and /dev/shm.
    limits = worker["resources"].get("limits", {})
    gpus = int(limits.get("nvidia.com/gpu", 0))
    slots = int(wargs.get("slots", "0")) or max(gpus, 1)
    if gpus:
        if int(worker["resources"].get("requests", {}).get("nvidia.com/gpu", gpus)) != gpus:
            errors.append("worker nvidia.com/gpu requests differ from limits")
        if int(wargs.get("slots", "0")) != gpus:
            errors.append("worker --slots=%s but nvidia.com/gpu %d" % (wargs.get("slots"), gpus))
        if not pod.get("nodeSelector") or not pod.get("tolerations"):
            errors.append("GPU workers have no node selector or tolerations for GPU nodes")
    shm = volume_of(pod, "/dev/shm")
    if not shm or shm.get("emptyDir", {}).get("medium") != "Memory":
        errors.append("worker /dev/shm is not a memory-backed emptyDir")
    else:
        size = quantity(shm["emptyDir"].get("sizeLimit", "0"))
        per_slot = SHM_PER_GPU_SLOT if gpus else SHM_PER_CPU_SLOT
        if size < slots * per_slot:
            errors.append("worker /dev/shm sizeLimit %s < %d slot(s) x %d MiB"
                          % (shm["emptyDir"]["sizeLimit"], slots, per_slot >> 20))
        if quantity(limits.get("memory", "0")) <= size:
            errors.append("worker memory limit %s does not leave room beyond /dev/shm (%s)"
                          % (limits.get("memory"), shm["emptyDir"]["sizeLimit"]))
    check_snapshot_root(pod, worker, wargs, limits, errors)
    check_network(m, worker_set, errors)


def check_snapshot_root(pod, worker, wargs, limits, errors):
    """--snapshot_root: a memory-backed emptyDir of its own, room for it in the limit."""
    root = wargs.get("snapshot_root", "").rstrip("/")
    if not root:
        errors.append("worker has no --snapshot_root: in-memory snapshots would go under "
                      "--work_dir, on a disk, where writeback costs training steps")
        return
    if "confine_ranks" in wargs and (root + "/").startswith("/dev/shm/"):
        errors.append("worker --snapshot_root %s is below /dev/shm: the worker refuses it with "
                      "--confine_ranks" % root)
        return
    volume = volume_of(pod, root)
    if not volume or volume.get("emptyDir", {}).get("medium") != "Memory":
        errors.append("worker --snapshot_root %s is not the mount of a memory-backed emptyDir"
                      % root)
        return
    size = quantity(volume["emptyDir"].get("sizeLimit", "0"))
    if size <= 0:
        errors.append("worker --snapshot_root volume has no sizeLimit: snapshots could take the "
                      "node's memory")
    shm = volume_of(pod, "/dev/shm") or {}
    shm_size = quantity(shm.get("emptyDir", {}).get("sizeLimit", "0"))
    if quantity(limits.get("memory", "0")) <= size + shm_size:
        errors.append("worker memory limit %s does not leave room beyond /dev/shm and the "
                      "snapshots (%s)" % (limits.get("memory"),
                                          volume["emptyDir"].get("sizeLimit")))


def check_network(m, worker_set, errors):
    sysctls = {s["name"]: s["value"] for s in
               worker_set["spec"]["template"]["spec"].get("securityContext", {}).get("sysctls", [])}
    lo, hi = (int(x) for x in sysctls.get("net.ipv4.ip_local_port_range", "0 0").split())
    policies = m.all("NetworkPolicy")
    if not any(p["spec"].get("podSelector") == {} and "Ingress" in p["spec"].get("policyTypes", [])
               and not p["spec"].get("ingress") for p in policies):
        errors.append("no default-deny ingress NetworkPolicy")
    labels = worker_set["spec"]["template"]["metadata"]["labels"]
    ranges = []
    for p in policies:
        if not selects(p["spec"]["podSelector"], labels):
            continue
        for rule in p["spec"].get("ingress", []):
            if any(selects(f.get("podSelector", {}), labels) and "namespaceSelector" not in f
                   for f in rule.get("from", [])):
                ranges += [(port["port"], port.get("endPort", port["port"]))
                           for port in rule.get("ports", [])]
    if (lo, hi) not in ranges:
        errors.append("worker ephemeral ports %d-%d (ip_local_port_range) are not what the "
                      "worker-to-worker NetworkPolicy allows: %s" % (lo, hi, ranges))
    for name, port in [("baton-coordinator", 7070)]:
        target = m.get("StatefulSet", name)["spec"]["template"]["metadata"]["labels"]
        if not any(selects(p["spec"]["podSelector"], target) and
                   any(port in [q["port"] for q in r.get("ports", [])] and not r.get("from")
                       for r in p["spec"].get("ingress", [])) for p in policies):
            errors.append("no NetworkPolicy admits users to the coordinator's API port %d" % port)
    for w in m.workloads():
        ports = [p["containerPort"] for p in container(w)["ports"] if p["name"] == "metrics"]
        target = w["spec"]["template"]["metadata"]["labels"]
        for port in ports:
            if not any(selects(p["spec"]["podSelector"], target) and
                       any(port in [q["port"] for q in r.get("ports", [])] and
                           any("namespaceSelector" in f for f in r.get("from", []))
                           for r in p["spec"].get("ingress", [])) for p in policies):
                errors.append("no NetworkPolicy admits Prometheus to %s's metrics port %d"
                              % (w["metadata"]["name"], port))


def check_monitoring(m, errors):
    for sm in m.all("ServiceMonitor"):
        services = [s for s in m.all("Service")
                    if selects(sm["spec"]["selector"], s["metadata"].get("labels", {}))]
        for ep in sm["spec"]["endpoints"]:
            if not any(ep["port"] in [p.get("name") for p in s["spec"]["ports"]] for s in services):
                errors.append("ServiceMonitor %s: no selected Service has port %s"
                              % (sm["metadata"]["name"], ep["port"]))
    for pm in m.all("PodMonitor"):
        pods = [w for w in m.workloads()
                if selects(pm["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])]
        for ep in pm["spec"]["podMetricsEndpoints"]:
            if not any(ep["port"] in [p.get("name") for p in container(w).get("ports", [])]
                       for w in pods):
                errors.append("PodMonitor %s: no selected pod has port %s"
                              % (pm["metadata"]["name"], ep["port"]))
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        if not m.all(kind):
            errors.append("no %s" % kind)
    dashboards = [c for c in m.all("ConfigMap")
                  if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    if not dashboards:
        errors.append("no ConfigMap labelled grafana_dashboard=1")


def check(docs, coordinator_help, worker_help, docker_dir, etcd_help=None):
    m = Manifests(docs)
    errors = []
    check_pod_security(m, errors)
    check_resources_probes_pdbs(m, errors)
    check_wiring(m, flags_of(coordinator_help), flags_of(worker_help), docker_dir, etcd_help,
                 errors)
    check_monitoring(m, errors)
    return errors


def main(rendered, coordinator_help, worker_help, docker_dir, etcd_help=None):
    with open(rendered) as f:
        docs = list(yaml.safe_load_all(f))
    etcd = None
    if etcd_help:
        with open(etcd_help) as f:
            etcd = f.read()
    with open(coordinator_help) as f, open(worker_help) as g:
        errors = check(docs, f.read(), g.read(), docker_dir, etcd)
    for e in errors:
        print("%s: %s" % (rendered, e))
    if errors:
        sys.exit("FAIL: %d policy problem(s)" % len(errors))
    print("PASS: %s: %d objects meet the policy" % (rendered, len([d for d in docs if d])))


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(*sys.argv[1:])
