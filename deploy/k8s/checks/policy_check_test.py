"""Each rule of policy_check.py fails on a render that breaks it (and only then).

    policy_check_test.py RENDERED_GPU.yaml COORDINATOR_HELPFULL WORKER_HELPFULL DOCKER_DIR
"""
import copy
import os
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policy_check  # noqa: E402

RENDERED, COORDINATOR_HELP, WORKER_HELP, DOCKER_DIR = sys.argv[1:5]
del sys.argv[1:5]


def load():
    with open(RENDERED) as f:
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
                                           "state_dir", "/tmp/state"), "state_dir")

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

    def test_monitoring(self):
        self.assertFails(lambda d: find(d, "PodMonitor", "baton-worker")["spec"][
            "podMetricsEndpoints"][0].update(port="metricz"), "no selected pod has port metricz")
        self.assertFails(lambda d: find(d, "ServiceMonitor", "baton-coordinator")["spec"][
            "selector"]["matchLabels"].update(x="y"), "no selected Service")
        self.assertFails(lambda d: d.remove(find(d, "PrometheusRule", "baton")), "no PrometheusRule")
        self.assertFails(lambda d: find(d, "ConfigMap", "baton-grafana-dashboard")["metadata"][
            "labels"].clear(), "grafana_dashboard")


if __name__ == "__main__":
    unittest.main()
