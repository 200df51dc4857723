"""The policy of coordinator replicas on etcd (components/ha), applied by policy_check.py to
every render. docs/DEPLOY.md, "Highly available coordinators", explains the layout; each
message says why its rule exists.

The coordinator (StatefulSet baton-coordinator):
  * more than one replica only with --store=etcd://; workers dial either the Service or
    (several addresses) every replica as it advertises itself; the coordinator's
    certificate (where cert-manager issues it) names every address workers dial;
  * on etcd: each replica advertises its own address on the --listen port, TLS to etcd
    (--etcd_ca, --etcd_cert, --etcd_key on mounted volumes), 2s <= --election_ttl <
    --worker_lease, --store names every member of the etcd StatefulSet with etcd's own
    --max-txn-ops and --max-request-bytes; readiness on baton.v1.JobService (only the
    leader is Ready, so the Service routes to it), liveness and startup on "" (a standby
    is alive, not failing);
  * more than one replica: pods created in parallel and updated OnDelete (a standby is never
    Ready, which OrderedReady and RollingUpdate wait for), one per node, a budget that wants
    exactly one healthy pod, a grace period for the resign, the headless Service publishing
    not-Ready pods when workers dial the replicas.
Every StatefulSet running etcd:
  * an odd number of members, at least 3, one per node, created in parallel; a budget that
    keeps a quorum and lets one member go;
  * flags etcd knows (its --help), client and peer TLS with client certificates required,
    https URLs, each member named after its pod and --initial-cluster naming every member's
    peer URL;
  * probes on the plaintext --listen-metrics-urls port: readiness /health, liveness not
    /health (it needs a quorum, which a restart does not bring back);
  * --data-dir a subdirectory of a volume claim of at least twice --quota-backend-bytes;
    compaction on;
  * --pre-vote on;
  * certificates (where cert-manager issues them): etcd's names every member the coordinator
    dials, the peer certificate every peer URL (and --peer-cert-allowed-cn), the coordinator's
    --etcd_ca from the issuer of etcd's certificate, its client certificate from the CA etcd
    trusts, and that CA not the workers' issuer;
  * NetworkPolicy: the coordinators reach the client port and members the peer port; no rule
    admits any source, a whole namespace, the workers, or another namespace beyond the
    metrics port.
"""
import math
import os
import re

from k8s_objects import args_of, container, duration_seconds, mounted_under, quantity, selects
from pod_spec import expand

LEADER_SERVICE = "baton.v1.JobService"
# --store's query parameter -> etcd's flag, and etcd's default for it.
STORE_LIMITS = {"max_txn_ops": ("max-txn-ops", 128),
                "max_request_bytes": ("max-request-bytes", 1572864)}
# A leader's shutdown: 1 s for open calls, then the lease revoke (0.5 s per etcd member).
MIN_RESIGN_GRACE_SECONDS = 10


def etcd_flags_of(help_text):
    return set(re.findall(r"^\s+--([a-z0-9-]+)", help_text, re.M))


def runs_etcd(workload):
    c = container(workload)
    command = (c.get("command") or [""])[0]
    image = c.get("image", "").split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return os.path.basename(command) == "etcd" or image == "etcd"


def replicas(workload):
    return workload["spec"].get("replicas", 1)


def pod_labels(workload):
    return workload["spec"]["template"]["metadata"].get("labels", {})


def pod_args(workload, ordinal):
    """The first container's flags in pod `ordinal` of a StatefulSet, $(VAR) expanded as the
    kubelet does (env values; fieldRefs to the pod's name and namespace, a stand-in IP)."""
    c = container(workload)
    fields = {"metadata.name": "%s-%d" % (workload["metadata"]["name"], ordinal),
              "metadata.namespace": workload["metadata"].get("namespace", "baton"),
              "status.podIP": "pod-ip-%d" % ordinal}
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = fields.get(e["valueFrom"]["fieldRef"]["fieldPath"], "?")
    return {k: expand(v, env) for k, v in args_of(c).items()}


def host_port(address):
    host, _, port = address.rpartition(":")
    return host, port


def url_host_port(urls):
    """("host", "port") of scheme://host:port[/...], the first of a comma-separated list."""
    return host_port(urls.split(",")[0].split("://", 1)[-1].split("/", 1)[0])


def one_per_node(workload):
    terms = workload["spec"]["template"]["spec"].get("affinity", {}).get(
        "podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    return any(t.get("topologyKey") == "kubernetes.io/hostname" and
               selects(t.get("labelSelector", {}), pod_labels(workload)) for t in terms)


def budgets(m, workload):
    return [p for p in m.all("PodDisruptionBudget")
            if selects(p["spec"].get("selector", {}), pod_labels(workload))]


def desired_healthy(pdb, n):
    """Pods of n a budget wants healthy, as the disruption controller computes it
    (percentages rounded up); None without minAvailable or maxUnavailable."""
    spec = pdb["spec"]

    def scaled(v):
        if isinstance(v, str) and v.endswith("%"):
            return math.ceil(int(v[:-1]) * n / 100)
        return int(v)
    if "minAvailable" in spec:
        return scaled(spec["minAvailable"])
    if "maxUnavailable" in spec:
        return n - scaled(spec["maxUnavailable"])
    return None


def certificate_of_file(m, workload, path):
    """The cert-manager Certificate whose Secret is mounted where `path` lies in the
    workload's first container; None for a Secret made otherwise or another volume."""
    mounts = [mt for mt in container(workload).get("volumeMounts", [])
              if path.startswith(mt["mountPath"].rstrip("/") + "/")]
    if not mounts:
        return None
    mount = max(mounts, key=lambda mt: len(mt["mountPath"]))
    volume = next((v for v in workload["spec"]["template"]["spec"].get("volumes", [])
                   if v["name"] == mount["name"]), {})
    secret = volume.get("secret", {}).get("secretName")
    return next((c for c in m.all("Certificate") if c["spec"].get("secretName") == secret),
                None) if secret else None


def covers(certificate, host):
    """Whether a Certificate names `host` (exactly, or by a one-label wildcard)."""
    for name in certificate["spec"].get("dnsNames", []) + certificate["spec"].get("ipAddresses", []):
        if name == host or (name.startswith("*.") and host.partition(".")[2] == name[2:]):
            return True
    return False


def issuer(certificate):
    ref = certificate["spec"]["issuerRef"]
    return "%s/%s" % (ref.get("kind", "Issuer"), ref["name"])


def parse_store(value):
    """([HOST:PORT], {query}) of an etcd:// --store value."""
    rest, _, query = value[len("etcd://"):].partition("?")
    hosts = rest.partition("/")[0]
    return ([h.strip() for h in hosts.split(",") if h.strip()],
            dict(p.partition("=")[::2] for p in query.split("&") if p))


def etcd_of_store(m, endpoints):
    """The etcd StatefulSet whose members (as they advertise their client URLs) are among
    `endpoints`, or None."""
    for w in m.workloads():
        if w["kind"] == "StatefulSet" and runs_etcd(w):
            members = {"%s:%s" % url_host_port(pod_args(w, i).get("advertise-client-urls", ""))
                       for i in range(replicas(w))}
            if members & set(endpoints):
                return w
    return None


def check_replicas(m, coord_set, worker_set, service, errors):
    """The coordinator's replicas, its store on etcd, and how workers reach it."""
    c = container(coord_set)
    args = args_of(c)
    n = replicas(coord_set)
    dialled = [a.strip() for a in args_of(container(worker_set)).get("coordinator", "").split(",")]
    tls = certificate_of_file(m, coord_set, args.get("tls_cert", ""))
    for host in sorted({host_port(a)[0] for a in dialled} if tls else ()):
        if not covers(tls, host):
            errors.append("the coordinator's certificate %s does not name %s, which workers dial"
                          % (tls["metadata"]["name"], host))
    store = args.get("store", "sqlite")
    if not store.startswith("etcd://"):
        if n > 1:
            errors.append("%d coordinator replicas on --store=%s: a SQLite state serves one "
                          "coordinator; replicas need --store=etcd://" % (n, store))
        if len(dialled) > 1:
            errors.append("worker dials %d coordinator addresses, but the coordinator is one "
                          "process on SQLite: dial its Service" % len(dialled))
        return
    listen_port = host_port(args.get("listen", ""))[1]
    advertised = [pod_args(coord_set, i).get("advertise_address", "") for i in range(n)]
    if "advertise_address" not in args:
        errors.append("coordinator on etcd: no --advertise_address (required with a wildcard "
                      "--listen: standbys name the leader by it)")
    elif len(set(advertised)) != n or any(host_port(a)[1] != listen_port for a in advertised):
        errors.append("coordinator replicas advertise %s: each its own address, on the --listen "
                      "port %s" % (advertised, listen_port))
    for flag in ("etcd_ca", "etcd_cert", "etcd_key"):
        if flag not in args:
            errors.append("coordinator on etcd: no --%s (TLS to etcd is required)" % flag)
        elif not mounted_under(c, args[flag]):
            errors.append("coordinator: --%s=%s is not on a mounted volume" % (flag, args[flag]))
    ttl = duration_seconds(args.get("election_ttl", "3s"))
    lease = duration_seconds(args.get("worker_lease", "10s"))
    if not 2 <= ttl < lease:
        errors.append("coordinator --election_ttl=%s: at least 2s, and below --worker_lease=%s "
                      "so that a failover does not stop the ranks"
                      % (args.get("election_ttl", "3s"), args.get("worker_lease", "10s")))
    ready = c.get("readinessProbe", {}).get("grpc", {}).get("service", "")
    if ready != LEADER_SERVICE:
        errors.append("coordinator readinessProbe asks for %r, not %s: standbys would be Ready "
                      "and the Service would send users and workers to them" % (ready, LEADER_SERVICE))
    for probe in ("livenessProbe", "startupProbe"):
        service_name = c.get(probe, {}).get("grpc", {}).get("service", "")
        if service_name:
            errors.append("coordinator %s asks for %r, which a standby reports NOT_SERVING: "
                          "standbys would be restarted; probe the overall status \"\""
                          % (probe, service_name))
    check_store(m, coord_set, args, errors)
    if n > 1:
        check_replica_placement(m, coord_set, n, errors)
    if len(dialled) > 1:
        if n == 1:
            errors.append("worker dials %d coordinator addresses, but there is one replica: dial "
                          "the Service" % len(dialled))
        elif set(dialled) != set(advertised):
            errors.append("worker dials %s, the replicas advertise %s: list every replica as it "
                          "advertises itself (standbys' hints name those), or dial the Service"
                          % (dialled, advertised))
        headless = m.get("Service", coord_set["spec"]["serviceName"])
        if headless and headless["spec"].get("publishNotReadyAddresses") is not True:
            errors.append("Service %s does not publish not-Ready addresses: a standby's name, "
                          "and a new leader's until its probe passes, would not resolve for the "
                          "workers that dial the replicas" % headless["metadata"]["name"])


def check_replica_placement(m, coord_set, n, errors):
    spec = coord_set["spec"]
    if spec.get("podManagementPolicy", "OrderedReady") != "Parallel":
        errors.append("coordinator podManagementPolicy is %s, not Parallel: OrderedReady waits "
                      "for each replica to be Ready before the next, and a standby never is"
                      % spec.get("podManagementPolicy", "OrderedReady"))
    strategy = spec.get("updateStrategy", {}).get("type", "RollingUpdate")
    if strategy != "OnDelete":
        errors.append("coordinator updateStrategy is %s, not OnDelete: a rolling update waits "
                      "for each new replica to be Ready, and a new standby never is" % strategy)
    if not one_per_node(coord_set):
        errors.append("coordinator replicas are not kept one per node (required pod "
                      "anti-affinity by hostname): one lost node could take several")
    for pdb in budgets(m, coord_set):
        want = desired_healthy(pdb, n)
        if want != 1:
            errors.append("PodDisruptionBudget %s wants %s of %d coordinator replicas healthy: "
                          "only the leader is Ready, so it must want exactly 1 (more refuses "
                          "every eviction, standbys' included; 0 protects nothing)"
                          % (pdb["metadata"]["name"], want, n))
    grace = spec["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    if grace < MIN_RESIGN_GRACE_SECONDS:
        errors.append("coordinator terminationGracePeriodSeconds %s < %d: a leader killed before "
                      "it resigns leaves the next one waiting out --election_ttl"
                      % (grace, MIN_RESIGN_GRACE_SECONDS))


def check_store(m, coord_set, args, errors):
    """--store against the etcd StatefulSet of the render (none: an etcd elsewhere)."""
    endpoints, query = parse_store(args["store"])
    etcd_sets = [w for w in m.workloads() if w["kind"] == "StatefulSet" and runs_etcd(w)]
    if not etcd_sets:
        return
    etcd_set = etcd_of_store(m, endpoints)
    if etcd_set is None:
        errors.append("coordinator --store names %s, none of them a member of StatefulSet %s as "
                      "it advertises itself" % (endpoints, etcd_sets[0]["metadata"]["name"]))
        return
    members = ["%s:%s" % url_host_port(pod_args(etcd_set, i).get("advertise-client-urls", ""))
               for i in range(replicas(etcd_set))]
    if set(endpoints) != set(members):
        errors.append("coordinator --store names %s, etcd's members are %s: list every member, so "
                      "that a call moves on past any that is down" % (endpoints, members))
    eargs = args_of(container(etcd_set))
    for param, (flag, default) in STORE_LIMITS.items():
        mine, theirs = query.get(param, str(default)), eargs.get(flag, str(default))
        if mine != theirs:
            errors.append("coordinator --store has %s=%s, etcd's --%s is %s: the coordinator sizes "
                          "its transactions by the URL (above etcd's, etcd refuses them; below, "
                          "batches split for nothing)" % (param, mine, flag, theirs))
    server = certificate_of_file(m, etcd_set, eargs.get("cert-file", ""))
    if server:
        for endpoint in endpoints:
            if not covers(server, host_port(endpoint)[0]):
                errors.append("etcd's certificate %s does not name %s, which the coordinator dials"
                              % (server["metadata"]["name"], host_port(endpoint)[0]))
        ca = certificate_of_file(m, coord_set, args.get("etcd_ca", ""))
        if ca and issuer(ca) != issuer(server):
            errors.append("coordinator --etcd_ca is the CA of %s (Certificate %s), etcd's "
                          "certificate is issued by %s: the coordinator would not trust etcd"
                          % (issuer(ca), ca["metadata"]["name"], issuer(server)))
    trusted = certificate_of_file(m, etcd_set, eargs.get("trusted-ca-file", ""))
    client = certificate_of_file(m, coord_set, args.get("etcd_cert", ""))
    if trusted and client and issuer(client) != issuer(trusted):
        errors.append("coordinator --etcd_cert is issued by %s, etcd trusts clients of %s: etcd "
                      "would refuse the coordinator" % (issuer(client), issuer(trusted)))


def check_etcd(m, etcd_set, etcd_flags, worker_set, errors):
    """One StatefulSet running etcd."""
    name = etcd_set["metadata"]["name"]
    c = container(etcd_set)
    args = args_of(c)
    n = replicas(etcd_set)
    for flag in args if etcd_flags is not None else ():
        if flag not in etcd_flags:
            errors.append("%s: --%s is not a flag of etcd" % (name, flag))
    if n < 3 or n % 2 == 0:
        errors.append("%s has %d members: an odd number, at least 3 (a quorum survives losing "
                      "(n-1)/2 of them; an even number survives no more than n-1)" % (name, n))
    if etcd_set["spec"].get("podManagementPolicy", "OrderedReady") != "Parallel":
        errors.append("%s podManagementPolicy is not Parallel: the first member cannot be Ready "
                      "without a quorum, so OrderedReady would never create the others" % name)
    if not one_per_node(etcd_set):
        errors.append("%s members are not kept one per node (required pod anti-affinity by "
                      "hostname): one lost node could take the quorum" % name)
    quorum = n // 2 + 1
    for pdb in budgets(m, etcd_set):
        want = desired_healthy(pdb, n)
        if want is None or not quorum <= want < n:
            errors.append("PodDisruptionBudget %s wants %s of %d etcd members healthy: it must keep "
                          "a quorum (%d) and let one go" % (pdb["metadata"]["name"], want, n, quorum))
    if args.get("pre-vote", "false") not in ("", "true"):
        errors.append("%s: --pre-vote is off: a member back from a hang or a partition forces an "
                      "election, during which etcd answers nothing and the coordinators' leader "
                      "may be deposed" % name)
    check_etcd_tls(m, etcd_set, args, worker_set, errors)
    check_etcd_probes(etcd_set, c, args, errors)
    check_etcd_storage(etcd_set, c, args, errors)
    check_etcd_network(m, etcd_set, args, worker_set, errors)


def check_etcd_tls(m, etcd_set, args, worker_set, errors):
    name = etcd_set["metadata"]["name"]
    c = container(etcd_set)
    for flag in ("client-cert-auth", "peer-client-cert-auth"):
        if args.get(flag, "false") not in ("", "true"):
            errors.append("%s: no --%s=true: anyone reaching the port could %s" % (
                name, flag, "read and write the coordinator's state" if flag == "client-cert-auth"
                else "join the cluster"))
    for flag in ("trusted-ca-file", "cert-file", "key-file",
                 "peer-trusted-ca-file", "peer-cert-file", "peer-key-file"):
        if flag not in args:
            errors.append("%s: no --%s (TLS is required)" % (name, flag))
        elif not mounted_under(c, args[flag]):
            errors.append("%s: --%s=%s is not on a mounted volume" % (name, flag, args[flag]))
    for flag in ("listen-client-urls", "advertise-client-urls", "listen-peer-urls",
                 "initial-advertise-peer-urls", "initial-cluster"):
        urls = [u.partition("=")[2] if flag == "initial-cluster" else u
                for u in args.get(flag, "").split(",")]
        if not all(u.startswith("https://") for u in urls):
            errors.append("%s: --%s is not https: %s" % (name, flag, args.get(flag)))
    peers = {}
    for i in range(replicas(etcd_set)):
        pod = "%s-%d" % (name, i)
        a = pod_args(etcd_set, i)
        if a.get("name") != pod:
            errors.append("%s: member %d is named %s, not after its pod (%s)"
                          % (name, i, a.get("name"), pod))
        peers[pod] = a.get("initial-advertise-peer-urls", "")
    cluster = dict(e.partition("=")[::2] for e in pod_args(etcd_set, 0).get(
        "initial-cluster", "").split(",") if e)
    if cluster != peers:
        errors.append("%s: --initial-cluster %s is not each member's --initial-advertise-peer-urls "
                      "%s" % (name, cluster, peers))
    peer = certificate_of_file(m, etcd_set, args.get("peer-cert-file", ""))
    if peer:
        for url in peers.values():
            if not covers(peer, url_host_port(url)[0]):
                errors.append("%s: the peer certificate %s does not name %s (members check that a "
                              "peer's certificate names it)" % (name, peer["metadata"]["name"],
                                                                url_host_port(url)[0]))
        allowed = args.get("peer-cert-allowed-cn")
        if allowed and peer["spec"].get("commonName") != allowed:
            errors.append("%s: --peer-cert-allowed-cn=%s, the peer certificate's common name is %s"
                          % (name, allowed, peer["spec"].get("commonName")))
    trusted = certificate_of_file(m, etcd_set, args.get("trusted-ca-file", ""))
    attributes = next((v.get("csi", {}).get("volumeAttributes", {})
                       for v in worker_set["spec"]["template"]["spec"].get("volumes", [])
                       if "csi" in v), {})
    worker_issuer = "%s/%s" % (attributes.get("csi.cert-manager.io/issuer-kind", "Issuer"),
                               attributes.get("csi.cert-manager.io/issuer-name"))
    if trusted and issuer(trusted) == worker_issuer:
        errors.append("%s trusts clients of %s, which issues every worker's certificate: any "
                      "worker could write the coordinator's state (give etcd a CA of its own)"
                      % (name, worker_issuer))


def container_port(c, port):
    if isinstance(port, int):
        return port
    return next((p["containerPort"] for p in c.get("ports", []) if p.get("name") == port), None)


def check_etcd_probes(etcd_set, c, args, errors):
    name = etcd_set["metadata"]["name"]
    metrics = args.get("listen-metrics-urls", "")
    if not metrics.startswith("http://"):
        errors.append("%s: no plaintext --listen-metrics-urls: the client port asks every caller "
                      "for a certificate, so the kubelet cannot probe it" % name)
        return
    port = int(url_host_port(metrics)[1])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe not in c:
            continue
        get = c[probe].get("httpGet")
        if not get or container_port(c, get.get("port")) != port:
            errors.append("%s %s is not an HTTP GET on the metrics port %d" % (name, probe, port))
    if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/health":
        errors.append("%s readinessProbe is not /health (a member in a quorum, no alarm)" % name)
    if c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/health":
        errors.append("%s livenessProbe is /health, which fails without a quorum: members cut off "
                      "from the others would be restarted, which does not bring it back" % name)


def check_etcd_storage(etcd_set, c, args, errors):
    name = etcd_set["metadata"]["name"]
    data = args.get("data-dir", "").rstrip("/")
    claims = {t["metadata"]["name"]: t for t in etcd_set["spec"].get("volumeClaimTemplates", [])}
    mounts = [mt for mt in c.get("volumeMounts", []) if mt["name"] in claims and
              (data + "/").startswith(mt["mountPath"].rstrip("/") + "/")]
    if not data or not mounts:
        errors.append("%s: --data-dir %s is not on a volume claim" % (name, data or "(unset)"))
        return
    mount = mounts[0]
    if data == mount["mountPath"].rstrip("/"):
        errors.append("%s: --data-dir is the root of its volume, which fsGroup makes group-writable "
                      "while etcd wants its directory 0700: use a subdirectory" % name)
    quota = int(args.get("quota-backend-bytes", "0") or 0)
    size = quantity(claims[mount["name"]]["spec"]["resources"]["requests"]["storage"])
    if quota <= 0:
        errors.append("%s: no --quota-backend-bytes: state the database's limit (and size the "
                      "volume for it)" % name)
    elif size < 2 * quota:
        errors.append("%s: volume of %d MiB < 2 x --quota-backend-bytes (%d MiB): a snapshot sent "
                      "to a member, or a defragmentation, needs a second copy"
                      % (name, size / (1 << 20), 2 * quota / (1 << 20)))
    if args.get("auto-compaction-retention", "0") in ("", "0"):
        errors.append("%s: no --auto-compaction-retention: every revision is kept until the "
                      "database reaches its quota and etcd refuses writes" % name)


def check_etcd_network(m, etcd_set, args, worker_set, errors):
    name = etcd_set["metadata"]["name"]
    c = container(etcd_set)
    labels = pod_labels(etcd_set)
    metrics = args.get("listen-metrics-urls", "")
    metrics_port = int(url_host_port(metrics)[1]) if metrics else None
    sources = []  # (podSelector, ports or None for all)
    for p in m.all("NetworkPolicy"):
        if not selects(p["spec"].get("podSelector", {}), labels):
            continue
        where = "NetworkPolicy %s" % p["metadata"]["name"]
        for rule in p["spec"].get("ingress", []):
            ports = [container_port(c, q["port"]) for q in rule.get("ports", [])] or None
            if not rule.get("from"):
                errors.append("%s admits any source to %s" % (where, name))
            for f in rule.get("from", []):
                if "ipBlock" in f:
                    errors.append("%s admits addresses (ipBlock) to %s" % (where, name))
                elif "namespaceSelector" in f:
                    if ports is None or set(ports) - {metrics_port}:
                        errors.append("%s admits another namespace to %s ports %s: only "
                                      "Prometheus, to the metrics port" % (where, name, ports))
                else:
                    selector = f.get("podSelector", {})
                    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
                        errors.append("%s admits every pod of the namespace to %s" % (where, name))
                    elif selects(selector, pod_labels(worker_set)):
                        errors.append("%s admits the workers (users' code) to %s" % (where, name))
                    sources.append((selector, ports))

    def admitted(who, port):
        return any(selects(s, who) and (ports is None or port in ports) for s, ports in sources)
    coord_set = m.get("StatefulSet", "baton-coordinator")
    client_port = int(url_host_port(args.get("listen-client-urls", ":0"))[1])
    peer_port = int(url_host_port(args.get("listen-peer-urls", ":0"))[1])
    if coord_set and not admitted(pod_labels(coord_set), client_port):
        errors.append("no NetworkPolicy admits the coordinators to %s's client port %d"
                      % (name, client_port))
    if not admitted(labels, peer_port):
        errors.append("no NetworkPolicy admits %s's members to each other's peer port %d"
                      % (name, peer_port))


def check(m, coord_set, worker_set, service, etcd_help, errors):
    check_replicas(m, coord_set, worker_set, service, errors)
    for w in m.workloads():
        if runs_etcd(w):
            if w["kind"] != "StatefulSet":
                errors.append("%s/%s runs etcd: members need a StatefulSet (stable names and "
                              "volumes)" % (w["kind"], w["metadata"]["name"]))
                continue
            if not etcd_help:
                errors.append("%s runs etcd, but no etcd --help was given to check its flags"
                              % w["metadata"]["name"])
            check_etcd(m, w, etcd_flags_of(etcd_help) if etcd_help else None, worker_set, errors)
