"""Each rule of policy_check.py (and ha_policy.py) fails on a render that breaks it (and only
then): the GPU overlay's render for the single coordinator's rules, the cpu-ha overlay's for
the coordinator replicas' and etcd's.

    policy_check_test.py RENDERED_GPU.yaml RENDERED_HA.yaml COORDINATOR_HELPFULL \
        WORKER_HELPFULL ETCD_HELP DOCKER_DIR
"""
import copy
import os
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policy_check  # noqa: E402

RENDERED, RENDERED_HA, COORDINATOR_HELP, WORKER_HELP, ETCD_HELP, DOCKER_DIR = sys.argv[1:7]
del sys.argv[1:7]


def load(rendered=RENDERED):
    with open(rendered) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def pod(docs, name):
    return find(docs, "StatefulSet", name)["spec"]["template"]["spec"]


def worker(docs):
    return pod(docs, "baton-worker")["containers"][0]


def set_arg(c, flag, value):
    c["args"] = [a for a in c["args"] if not a.startswith("--%s=" % flag) and a != "--" + flag]
    if value is not None:
        c["args"].append("--%s=%s" % (flag, value) if value != "" else "--" + flag)


class PolicyCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load()
        with open(COORDINATOR_HELP) as f:
            cls.coordinator_help = f.read()
        with open(WORKER_HELP) as f:
            cls.worker_help = f.read()

    def errors(self, mutate):
        docs = copy.deepcopy(self.docs)
        mutate(docs)
        return policy_check.check(docs, self.coordinator_help, self.worker_help, DOCKER_DIR)

    def assertFails(self, mutate, needle):
        errors = self.errors(mutate)
        self.assertTrue(any(needle in e for e in errors),
                        "expected an error containing %r, got %s" % (needle, errors))

    def test_unmodified_render_passes(self):
        self.assertEqual(self.errors(lambda d: None), [])

    def test_pod_security(self):
        self.assertFails(lambda d: worker(d)["securityContext"].update(runAsNonRoot=False),
                         "runAsNonRoot is not true")
        self.assertFails(lambda d: pod(d, "baton-coordinator")["securityContext"].update(
            runAsUser=0), "runAsUser 0")
        self.assertFails(lambda d: worker(d)["securityContext"].pop("allowPrivilegeEscalation"),
                         "allowPrivilegeEscalation is not false")
        self.assertFails(lambda d: worker(d)["securityContext"]["capabilities"].update(drop=[]),
                         "do not drop ALL")
        self.assertFails(lambda d: worker(d)["securityContext"]["capabilities"].update(
            add=["SYS_ADMIN"]), "adds capabilities")
        self.assertFails(lambda d: pod(d, "baton-coordinator")["securityContext"].pop(
            "seccompProfile"), "seccompProfile is None")
        self.assertFails(lambda d: worker(d)["securityContext"].update(readOnlyRootFilesystem=False),
                         "readOnlyRootFilesystem")
        self.assertFails(lambda d: pod(d, "baton-worker")["volumes"].append(
            {"name": "h", "hostPath": {"path": "/"}}), "not allowed by 'restricted'")
        self.assertFails(lambda d: pod(d, "baton-worker").update(hostNetwork=True), "hostNetwork")
        self.assertFails(lambda d: find(d, "Namespace", "baton")["metadata"]["labels"].clear(),
                         "does not enforce Pod Security")
        self.assertFails(lambda d: pod(d, "baton-worker").pop("automountServiceAccountToken"),
                         "automountServiceAccountToken")
        self.assertFails(lambda d: find(d, "ServiceAccount", "baton-worker").pop(
            "automountServiceAccountToken"), "mounts a token")

    def test_images_pinned_by_digest(self):
        self.assertFails(lambda d: worker(d).update(image="registry.example.com/baton-worker:1.0"),
                         "not pinned")
        self.assertFails(lambda d: worker(d).update(image="baton-worker:latest"), "not pinned")

    def test_limits_probes_and_budgets(self):
        self.assertFails(lambda d: worker(d)["resources"]["limits"].pop("memory"),
                         "no memory limits")
        self.assertFails(lambda d: pod(d, "baton-coordinator")["containers"][0].pop(
            "livenessProbe"), "no livenessProbe")
        self.assertFails(lambda d: worker(d).pop("readinessProbe"), "no readinessProbe")
        self.assertFails(lambda d: d.remove(find(d, "PodDisruptionBudget", "baton-worker")),
                         "no PodDisruptionBudget")

    def test_daemons_run_under_the_images_init(self):
        self.assertFails(lambda d: worker(d).update(command=["/usr/local/bin/baton-worker"]),
                         "not tini -- /usr/local/bin/baton-worker")
        self.assertFails(lambda d: worker(d).update(
            image="registry.example.com/baton/baton-unknown:1@sha256:" + "0" * 64),
            "runs None")

    def test_wiring(self):
        self.assertFails(lambda d: set_arg(worker(d), "no_such_flag", "1"),
                         "--no_such_flag is not a flag")
        self.assertFails(lambda d: set_arg(worker(d), "coordinator", "elsewhere:7070"),
                         "not the coordinator's Service")
        self.assertFails(lambda d: set_arg(worker(d), "insecure", ""), "--insecure")
        self.assertFails(lambda d: set_arg(worker(d), "tls_key", "/secrets/key.pem"),
                         "not on a mounted volume")
        self.assertFails(lambda d: set_arg(pod(d, "baton-coordinator")["containers"][0],
                                           "health_listen", "0.0.0.0:9999"), "probes port")
        self.assertFails(lambda d: set_arg(worker(d), "health_listen", None),
                         "worker readinessProbe probes port 7073")
        self.assertFails(lambda d: set_arg(pod(d, "baton-coordinator")["containers"][0],
                                           "state_dir", "/nowhere"),
                         "state_dir /nowhere is not on a mounted volume")
        self.assertFails(lambda d: set_arg(pod(d, "baton-coordinator")["containers"][0],
                                           "queue_file", "/etc/queues.yaml"),
                         "--queue_file=/etc/queues.yaml is not on a mounted volume")

    def test_sqlite_state_on_the_claim(self):
        self.assertFails(lambda d: set_arg(pod(d, "baton-coordinator")["containers"][0],
                                           "state_dir", "/tmp/state"),
                         "state_dir /tmp/state is not the StatefulSet's volume claim")

    def test_worker_drain_and_placement(self):
        self.assertFails(lambda d: pod(d, "baton-worker").update(terminationGracePeriodSeconds=30),
                         "terminationGracePeriodSeconds")
        self.assertFails(lambda d: pod(d, "baton-worker").pop("affinity"), "one per node")
        self.assertFails(lambda d: set_arg(worker(d), "allowed_paths", "/data"), "allowed_paths")
        self.assertFails(lambda d: find(d, "PersistentVolumeClaim", "baton-shared")["spec"].update(
            accessModes=["ReadWriteOnce"]), "not a ReadWriteMany claim")

    def test_gpus_slots_and_shm(self):
        self.assertFails(lambda d: set_arg(worker(d), "slots", "4"), "--slots=4 but nvidia.com/gpu 8")
        self.assertFails(lambda d: worker(d)["resources"]["requests"].update({"nvidia.com/gpu": 4}),
                         "requests differ")
        self.assertFails(lambda d: pod(d, "baton-worker").pop("tolerations"), "tolerations")

        def small_shm(d):
            next(v for v in pod(d, "baton-worker")["volumes"] if v["name"] == "dshm")[
                "emptyDir"]["sizeLimit"] = "1Gi"
        self.assertFails(small_shm, "/dev/shm sizeLimit 1Gi < 8 slot(s)")

        def disk_shm(d):
            next(v for v in pod(d, "baton-worker")["volumes"] if v["name"] == "dshm")[
                "emptyDir"].pop("medium")
        self.assertFails(disk_shm, "not a memory-backed emptyDir")
        self.assertFails(lambda d: worker(d)["resources"]["limits"].update(memory="16Gi"),
                         "does not leave room")

    def test_snapshot_root(self):
        def snapshots(d):
            return next(v for v in pod(d, "baton-worker")["volumes"] if v["name"] == "snapshots")
        self.assertFails(lambda d: set_arg(worker(d), "snapshot_root", None),
                         "worker has no --snapshot_root")
        self.assertFails(lambda d: snapshots(d)["emptyDir"].pop("medium"),
                         "--snapshot_root /var/lib/baton-snapshots is not the mount of a "
                         "memory-backed emptyDir")
        self.assertFails(lambda d: set_arg(worker(d), "snapshot_root", "/var/lib/baton-worker/s"),
                         "is not the mount of a memory-backed emptyDir")
        self.assertFails(lambda d: set_arg(worker(d), "snapshot_root", "/dev/shm/snapshots"),
                         "is below /dev/shm")
        self.assertFails(lambda d: snapshots(d)["emptyDir"].pop("sizeLimit"), "has no sizeLimit")
        self.assertFails(lambda d: snapshots(d)["emptyDir"].update(sizeLimit="470Gi"),
                         "does not leave room beyond /dev/shm and the snapshots")

    def test_network_policies(self):
        self.assertFails(lambda d: d.remove(find(d, "NetworkPolicy", "baton-default-deny")),
                         "default-deny")

        def other_range(d):
            pod(d, "baton-worker")["securityContext"]["sysctls"][0]["value"] = "30000 30999"
        self.assertFails(other_range, "are not what the worker-to-worker NetworkPolicy allows")
        self.assertFails(lambda d: d.remove(find(d, "NetworkPolicy", "baton-metrics")),
                         "admits Prometheus")
        self.assertFails(lambda d: d.remove(find(d, "NetworkPolicy", "baton-coordinator-api")),
                         "admits users")

    def test_coordinator_replicas_need_etcd(self):
        self.assertFails(lambda d: find(d, "StatefulSet", "baton-coordinator")["spec"].update(
            replicas=2), "2 coordinator replicas on --store=sqlite")
        self.assertFails(lambda d: set_arg(worker(d), "coordinator",
                                           "baton-coordinator:7070,baton-coordinator-headless:7070"),
                         "one process on SQLite: dial its Service")
        self.assertFails(lambda d: find(d, "Certificate", "baton-coordinator")["spec"][
            "dnsNames"].remove("baton-coordinator"),
            "certificate baton-coordinator does not name baton-coordinator, which workers dial")

    def test_monitoring(self):
        self.assertFails(lambda d: find(d, "PodMonitor", "baton-worker")["spec"][
            "podMetricsEndpoints"][0].update(port="metricz"), "no selected pod has port metricz")
        self.assertFails(lambda d: find(d, "ServiceMonitor", "baton-coordinator")["spec"][
            "selector"]["matchLabels"].update(x="y"), "no selected Service")
        self.assertFails(lambda d: d.remove(find(d, "PrometheusRule", "baton")), "no PrometheusRule")
        self.assertFails(lambda d: find(d, "ConfigMap", "baton-grafana-dashboard")["metadata"][
            "labels"].clear(), "grafana_dashboard")



def coordinator(docs):
    return pod(docs, "baton-coordinator")["containers"][0]


def etcd(docs):
    return pod(docs, "baton-etcd")["containers"][0]


def replace_in_arg(c, flag, old, new):
    """Replaces `old` by `new` in the value of --flag (which must contain it)."""
    arg = next(a for a in c["args"] if a.startswith("--%s=" % flag))
    assert old in arg, (arg, old)
    c["args"][c["args"].index(arg)] = arg.replace(old, new)


class HighlyAvailableTest(PolicyCheckTest):
    """The cpu-ha overlay: three coordinator replicas on a three-member etcd."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.docs = load(RENDERED_HA)
        with open(ETCD_HELP) as f:
            cls.etcd_help = f.read()

    def errors(self, mutate, etcd_help=True):
        docs = copy.deepcopy(self.docs)
        mutate(docs)
        return policy_check.check(docs, self.coordinator_help, self.worker_help, DOCKER_DIR,
                                  self.etcd_help if etcd_help else None)

    # The GPU overlay's tests do not apply here (no GPUs); these replace them.
    test_gpus_slots_and_shm = None
    test_coordinator_replicas_need_etcd = None
    # On etcd --state_dir holds only the replica's points and lines: an emptyDir will do.
    test_sqlite_state_on_the_claim = None

    def test_needs_etcds_help(self):
        errors = self.errors(lambda d: None, etcd_help=False)
        self.assertTrue(any("no etcd --help was given" in e for e in errors), errors)

    def test_replicas_need_etcd(self):
        self.assertFails(lambda d: set_arg(coordinator(d), "store", None),
                         "3 coordinator replicas on --store=sqlite")
        self.assertFails(lambda d: set_arg(coordinator(d), "store", None),
                         "worker dials 3 coordinator addresses, but the coordinator is one process")

    def test_replica_flags(self):
        self.assertFails(lambda d: set_arg(coordinator(d), "advertise_address", None),
                         "no --advertise_address")
        self.assertFails(lambda d: set_arg(coordinator(d), "advertise_address",
                                           "baton-coordinator:7070"), "each its own address")
        self.assertFails(lambda d: replace_in_arg(coordinator(d), "advertise_address", ":7070",
                                                  ":7071"), "on the --listen port 7070")
        self.assertFails(lambda d: set_arg(coordinator(d), "etcd_key", None), "no --etcd_key")
        self.assertFails(lambda d: set_arg(coordinator(d), "etcd_ca", "/etc/etcd-ca.crt"),
                         "--etcd_ca=/etc/etcd-ca.crt is not on a mounted volume")
        self.assertFails(lambda d: set_arg(coordinator(d), "election_ttl", "30s"),
                         "--election_ttl=30s: at least 2s, and below --worker_lease=30s")
        self.assertFails(lambda d: set_arg(coordinator(d), "election_ttl", "1s"),
                         "--election_ttl=1s")

    def test_replica_probes(self):
        self.assertFails(lambda d: coordinator(d)["readinessProbe"]["grpc"].pop("service"),
                         "readinessProbe asks for '', not baton.v1.JobService")
        self.assertFails(lambda d: coordinator(d)["livenessProbe"]["grpc"].update(
            service="baton.v1.JobService"), "livenessProbe asks for 'baton.v1.JobService'")
        self.assertFails(lambda d: coordinator(d)["startupProbe"]["grpc"].update(
            service="baton.v1.WorkerService"), "standbys would be restarted")

    def test_replica_placement_and_updates(self):
        spec = lambda d: find(d, "StatefulSet", "baton-coordinator")["spec"]  # noqa: E731
        self.assertFails(lambda d: spec(d).pop("podManagementPolicy"),
                         "coordinator podManagementPolicy is OrderedReady, not Parallel")
        self.assertFails(lambda d: spec(d).update(updateStrategy={"type": "RollingUpdate"}),
                         "coordinator updateStrategy is RollingUpdate, not OnDelete")
        self.assertFails(lambda d: pod(d, "baton-coordinator").pop("affinity"),
                         "coordinator replicas are not kept one per node")
        self.assertFails(lambda d: pod(d, "baton-coordinator").update(
            terminationGracePeriodSeconds=5), "coordinator terminationGracePeriodSeconds 5")
        self.assertFails(lambda d: find(d, "PodDisruptionBudget", "baton-coordinator").update(
            spec={"minAvailable": 2, "selector": {"matchLabels": {
                "app.kubernetes.io/name": "baton-coordinator"}}}),
            "wants 2 of 3 coordinator replicas healthy")
        self.assertFails(lambda d: find(d, "PodDisruptionBudget", "baton-coordinator").update(
            spec={"maxUnavailable": 1, "selector": {"matchLabels": {
                "app.kubernetes.io/name": "baton-coordinator"}}}),
            "wants 2 of 3 coordinator replicas healthy")

    def test_workers_dial_every_replica(self):
        self.assertFails(lambda d: replace_in_arg(
            worker(d), "coordinator",
            ",baton-coordinator-2.baton-coordinator-headless.baton.svc:7070", ""),
            "list every replica as it advertises itself")
        self.assertFails(lambda d: find(d, "Service", "baton-coordinator-headless")["spec"].pop(
            "publishNotReadyAddresses"), "does not publish not-Ready addresses")
        self.assertFails(lambda d: find(d, "StatefulSet", "baton-coordinator")["spec"].update(
            replicas=1), "but there is one replica: dial the Service")
        self.assertFails(lambda d: find(d, "Certificate", "baton-coordinator")["spec"][
            "dnsNames"].remove("baton-coordinator-2.baton-coordinator-headless.baton.svc"),
            "does not name baton-coordinator-2.baton-coordinator-headless.baton.svc")

    def test_store_names_etcd(self):
        self.assertFails(lambda d: replace_in_arg(
            coordinator(d), "store", ",baton-etcd-2.baton-etcd-peer.baton.svc:2379", ""),
            "list every member")
        self.assertFails(lambda d: set_arg(coordinator(d), "store", "etcd://etcd.example:2379"),
                         "none of them a member of StatefulSet baton-etcd")
        self.assertFails(lambda d: replace_in_arg(coordinator(d), "store", "max_txn_ops=1024",
                                                  "max_txn_ops=128"),
                         "max_txn_ops=128, etcd's --max-txn-ops is 1024")
        self.assertFails(lambda d: set_arg(etcd(d), "max-request-bytes", None),
                         "max_request_bytes=8388608, etcd's --max-request-bytes is 1572864")

    def test_etcd_members(self):
        spec = lambda d: find(d, "StatefulSet", "baton-etcd")["spec"]  # noqa: E731
        self.assertFails(lambda d: spec(d).update(replicas=4), "baton-etcd has 4 members")
        self.assertFails(lambda d: spec(d).update(replicas=1), "baton-etcd has 1 members")
        self.assertFails(lambda d: spec(d).pop("podManagementPolicy"),
                         "baton-etcd podManagementPolicy is not Parallel")
        self.assertFails(lambda d: pod(d, "baton-etcd").pop("affinity"),
                         "baton-etcd members are not kept one per node")
        self.assertFails(lambda d: find(d, "PodDisruptionBudget", "baton-etcd")["spec"].update(
            minAvailable=3), "wants 3 of 3 etcd members healthy")
        self.assertFails(lambda d: find(d, "PodDisruptionBudget", "baton-etcd")["spec"].update(
            minAvailable="67%"), "wants 3 of 3 etcd members healthy")  # rounded up
        self.assertFails(lambda d: find(d, "PodDisruptionBudget", "baton-etcd")["spec"].update(
            minAvailable=1), "wants 1 of 3 etcd members healthy")
        self.assertFails(lambda d: d.remove(find(d, "PodDisruptionBudget", "baton-etcd")),
                         "StatefulSet/baton-etcd: no PodDisruptionBudget")
        self.assertFails(lambda d: find(d, "StatefulSet", "baton-etcd").update(kind="Deployment"),
                         "Deployment/baton-etcd runs etcd: members need a StatefulSet")
        self.assertFails(lambda d: set_arg(etcd(d), "no-such-flag", "1"),
                         "--no-such-flag is not a flag of etcd")
        self.assertFails(lambda d: set_arg(etcd(d), "name", "etcd"),
                         "member 0 is named etcd, not after its pod")
        self.assertFails(lambda d: replace_in_arg(
            etcd(d), "initial-cluster",
            ",baton-etcd-2=https://baton-etcd-2.baton-etcd-peer.baton.svc:2380", ""),
            "--initial-cluster")

    def test_etcd_tls(self):
        self.assertFails(lambda d: set_arg(etcd(d), "client-cert-auth", "false"),
                         "no --client-cert-auth=true")
        self.assertFails(lambda d: set_arg(etcd(d), "peer-client-cert-auth", None),
                         "no --peer-client-cert-auth=true")
        self.assertFails(lambda d: set_arg(etcd(d), "peer-key-file", None), "no --peer-key-file")
        self.assertFails(lambda d: set_arg(etcd(d), "cert-file", "/tls/tls.crt"),
                         "--cert-file=/tls/tls.crt is not on a mounted volume")
        self.assertFails(lambda d: replace_in_arg(etcd(d), "listen-client-urls", "https", "http"),
                         "--listen-client-urls is not https")
        self.assertFails(lambda d: replace_in_arg(etcd(d), "initial-cluster", "https", "http"),
                         "--initial-cluster is not https")
        self.assertFails(lambda d: find(d, "Certificate", "baton-etcd-server")["spec"][
            "dnsNames"].remove("baton-etcd-1.baton-etcd-peer.baton.svc"),
            "etcd's certificate baton-etcd-server does not name baton-etcd-1.baton-etcd-peer")
        self.assertFails(lambda d: find(d, "Certificate", "baton-etcd-peer")["spec"][
            "dnsNames"].pop(), "peer certificate baton-etcd-peer does not name baton-etcd-2")
        self.assertFails(lambda d: find(d, "Certificate", "baton-etcd-peer")["spec"].update(
            commonName="etcd"), "--peer-cert-allowed-cn=baton-etcd-peer")

        def etcd_on_baton_ca(d):
            for name in ("baton-etcd-server", "baton-coordinator-etcd"):
                find(d, "Certificate", name)["spec"]["issuerRef"]["name"] = "baton-ca"
        self.assertFails(etcd_on_baton_ca, "which issues every worker's certificate")
        self.assertFails(lambda d: find(d, "Certificate", "baton-coordinator-etcd")["spec"][
            "issuerRef"].update(name="baton-ca"), "etcd would refuse the coordinator")
        self.assertFails(lambda d: find(d, "Certificate", "baton-etcd-server")["spec"][
            "issuerRef"].update(name="baton-ca"), "the coordinator would not trust etcd")

    def test_etcd_probes(self):
        self.assertFails(lambda d: set_arg(etcd(d), "listen-metrics-urls", None),
                         "no plaintext --listen-metrics-urls")
        self.assertFails(lambda d: etcd(d)["livenessProbe"]["httpGet"].update(path="/health"),
                         "livenessProbe is /health, which fails without a quorum")
        self.assertFails(lambda d: etcd(d)["readinessProbe"]["httpGet"].update(path="/metrics"),
                         "readinessProbe is not /health")
        self.assertFails(lambda d: etcd(d)["readinessProbe"]["httpGet"].update(port="client"),
                         "baton-etcd readinessProbe is not an HTTP GET on the metrics port 2381")

    def test_etcd_storage(self):
        self.assertFails(lambda d: set_arg(etcd(d), "data-dir", "/var/lib/etcd"),
                         "--data-dir is the root of its volume")
        self.assertFails(lambda d: set_arg(etcd(d), "data-dir", "/tmp/etcd"),
                         "--data-dir /tmp/etcd is not on a volume claim")
        self.assertFails(lambda d: set_arg(etcd(d), "quota-backend-bytes", str(8 << 30)),
                         "volume of 8192 MiB < 2 x --quota-backend-bytes (16384 MiB)")
        self.assertFails(lambda d: set_arg(etcd(d), "quota-backend-bytes", None),
                         "no --quota-backend-bytes")
        self.assertFails(lambda d: set_arg(etcd(d), "auto-compaction-retention", None),
                         "no --auto-compaction-retention")
        self.assertFails(lambda d: set_arg(etcd(d), "pre-vote", None), "--pre-vote is off")
        self.assertFails(lambda d: set_arg(etcd(d), "pre-vote", "false"), "--pre-vote is off")

    def test_etcd_network(self):
        def rules(d):
            return find(d, "NetworkPolicy", "baton-etcd")["spec"]["ingress"]
        self.assertFails(lambda d: rules(d)[0].pop("from"), "admits any source to baton-etcd")
        self.assertFails(lambda d: rules(d)[0]["from"].append({"ipBlock": {"cidr": "10.0.0.0/8"}}),
                         "admits addresses (ipBlock) to baton-etcd")
        self.assertFails(lambda d: rules(d)[0]["from"].append({"podSelector": {}}),
                         "admits every pod of the namespace to baton-etcd")
        self.assertFails(lambda d: rules(d)[0]["from"].append({"podSelector": {"matchLabels": {
            "app.kubernetes.io/name": "baton-worker"}}}), "admits the workers")
        self.assertFails(lambda d: rules(d)[2]["ports"].append({"protocol": "TCP", "port": 2379}),
                         "admits another namespace to baton-etcd ports")
        self.assertFails(lambda d: rules(d)[0]["from"].pop(0),
                         "no NetworkPolicy admits the coordinators to baton-etcd's client port")
        self.assertFails(lambda d: rules(d).pop(1),
                         "no NetworkPolicy admits baton-etcd's members to each other's peer port")
        self.assertFails(lambda d: rules(d).pop(2), "admits Prometheus to baton-etcd's metrics")


if __name__ == "__main__":
    unittest.main()
