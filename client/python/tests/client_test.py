"""Unit tests of baton.client: connection resolution, job specs, error mapping, and the
Client against an in-process fake coordinator (tests/testing/fake_coordinator.py).

Needs the package tree with the generated stubs on sys.path: $BATON_PYTHON_PACKAGE, else
the Bazel runfiles' client/python/package (//client/python:package).
"""

import datetime
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.environ.get("BATON_PYTHON_PACKAGE") or os.path.join(
    os.environ.get("TEST_SRCDIR", ""), "baton", "client", "python", "package")
sys.path.insert(0, PACKAGE)
sys.path.insert(0, HERE)

import grpc  # noqa: E402

from baton import client as bc  # noqa: E402
from baton.v1 import job_pb2, job_service_pb2  # noqa: E402
from testing.fake_coordinator import FakeCoordinator  # noqa: E402

MNIST = {
    "name": "mnist",
    "trainer": {"model": "mlp", "dataset": "mnist", "data_dir": "data", "hidden": [64, 32]},
    "workers": {"min": 1, "max": 2},
    "budget": {"max_steps": 10},
}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


class ConnectionTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.home = os.path.join(self.dir, "home")
        write(os.path.join(self.home, ".baton", "alice.token"), "t-alice\n")
        self.config = write(os.path.join(self.dir, "config.yaml"), """\
            current_context: alice
            contexts:
              alice:
                coordinator: baton.example.com:7070
                ca: ~/ca.crt
                token_file: ~/.baton/alice.token
              local:
                coordinator: 127.0.0.1:7070
                insecure: true
            """)

    def resolve(self, env=None, **kwargs):
        environ = {"HOME": self.home, "BATON_CONFIG": self.config}
        environ.update(env or {})
        return bc.resolve_connection(environ=environ, **kwargs)

    def test_current_context(self):
        conn = self.resolve()
        self.assertEqual(conn.coordinator, "baton.example.com:7070")
        self.assertFalse(conn.insecure)
        self.assertEqual(conn.ca, self.home + "/ca.crt")
        self.assertEqual(conn.token, "t-alice")
        self.assertEqual(conn.context, "alice")
        self.assertNotIn("t-alice", repr(conn))

    def test_arguments_beat_environment_beat_context(self):
        env = {"BATON_COORDINATOR": "env.example.com:1", "BATON_TOKEN": "t-env"}
        conn = self.resolve(env)
        self.assertEqual((conn.coordinator, conn.token), ("env.example.com:1", "t-env"))
        conn = self.resolve(env, coordinator="arg.example.com:2", token="t-arg", ca="/c.pem")
        self.assertEqual((conn.coordinator, conn.token, conn.ca),
                         ("arg.example.com:2", "t-arg", "/c.pem"))
        token_file = write(os.path.join(self.dir, "other.token"), " t-file \n")
        self.assertEqual(self.resolve(env, token_file=token_file).token, "t-file")

    def test_context_selection(self):
        self.assertTrue(self.resolve({"BATON_CONTEXT": "local"}).insecure)
        conn = self.resolve({"BATON_CONTEXT": "alice"}, context="local")
        self.assertEqual((conn.coordinator, conn.insecure, conn.context),
                         ("127.0.0.1:7070", True, "local"))
        with self.assertRaises(bc.InvalidArgument) as e:
            self.resolve(context="bob")
        self.assertIn("no context 'bob'", str(e.exception))

    def test_default_without_config(self):
        environ = {"HOME": self.home}  # no ~/.config/baton/config.yaml: no file needed
        conn = bc.resolve_connection(insecure=True, environ=environ)
        self.assertEqual(conn.coordinator, "localhost:7070")
        with self.assertRaises(bc.FailedPrecondition) as e:
            bc.resolve_connection(environ=environ)
        self.assertIn("no CA certificate", str(e.exception))
        xdg = os.path.join(self.dir, "xdg")
        write(os.path.join(xdg, "baton", "config.yaml"),
              "contexts: {x: {coordinator: '[::1]:9', insecure: true}}\ncurrent_context: x\n")
        conn = bc.resolve_connection(environ={"HOME": self.home, "XDG_CONFIG_HOME": xdg})
        self.assertEqual((conn.coordinator, conn.insecure), ("[::1]:9", True))

    def test_insecure_only_to_loopback(self):
        for address in ("127.0.0.1:1", "127.8.0.1:1", "localhost:1", "[::1]:1", "unix:/s"):
            self.assertTrue(self.resolve(coordinator=address, insecure=True).insecure, address)
        with self.assertRaises(bc.InvalidArgument) as e:
            self.resolve({"BATON_INSECURE": "1"}, coordinator="10.0.0.1:7070")
        self.assertIn("only allowed on loopback", str(e.exception))

    def test_bad_config_files(self):
        cases = {
            "contexts: {a: {coordinator: x, tls: true}}": "contexts.a: unknown field 'tls'",
            "contexts: {a: {insecure: maybe}}": "contexts.a.insecure: must be true or false",
            "context: a": "unknown field 'context'",
            "- a": "must be a map",
        }
        for text, want in cases.items():
            write(self.config, text)
            with self.assertRaises(bc.InvalidArgument) as e:
                self.resolve()
            self.assertIn(want, str(e.exception))
        with self.assertRaises(bc.FailedPrecondition):
            self.resolve({"BATON_CONFIG": os.path.join(self.dir, "missing.yaml")})

    def test_missing_token_file(self):
        with self.assertRaises(bc.FailedPrecondition) as e:
            self.resolve(token_file=os.path.join(self.dir, "nope"))
        self.assertIn("cannot read the token file", str(e.exception))


class JobSpecTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def test_dict_resolves_paths_against_cwd(self):
        spec = bc.to_job_spec(MNIST)
        self.assertEqual(spec.trainer.data_dir, os.path.join(os.getcwd(), "data"))
        self.assertEqual(list(spec.trainer.hidden), [64, 32])
        self.assertTrue(spec.workers.HasField("max"))

    def test_file_like_the_cli(self):
        path = write(os.path.join(self.dir, "jobs", "job.yaml"), """\
            name: m
            trainer: {model: mlp, dataset: mnist, data_dir: ../data, momentum: 0}
            workers: {min: 2}
            env: {OMP_NUM_THREADS: 4}
            checkpoint_dir: ckpt
            restart_policy: {backoff_initial: 1m30s, stall_factor: .inf}
            """)
        spec = bc.load_job_file(path, overrides=["budget.max_steps=20", "checkpoint_dir=c2"])
        self.assertEqual(spec.trainer.data_dir, os.path.join(self.dir, "data"))
        self.assertEqual(spec.checkpoint_dir, os.path.join(self.dir, "jobs", "c2"))
        self.assertTrue(spec.trainer.HasField("momentum"))
        self.assertEqual(spec.env["OMP_NUM_THREADS"], "4")
        self.assertEqual(spec.restart_policy.backoff_initial.seconds, 90)
        self.assertEqual(spec.restart_policy.stall_factor, float("inf"))
        self.assertEqual(spec.budget.max_steps, 20)

    def test_errors_name_file_position_and_field(self):
        path = write(os.path.join(self.dir, "bad.yaml"), """\
            name: m
            workers:
              min: two
            """)
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.load_job_file(path)
        self.assertEqual(str(e.exception),
                         "%s:3:8: workers.min: expected an integer, got 'two'" % path)
        self.assertEqual(e.exception.field, "workers.min")
        cases = [
            ({"workers": {"min": "2"}}, "workers.min: expected an integer, got '2'"),
            ({"trainer": {}, "command": {}}, "only one of trainer and command"),
            ({"workers": {"mni": 1}}, "workers.mni: unknown field"),
            ({"trainer": {"hidden": [1, "x"]}}, "trainer.hidden[1]: expected an integer"),
            ({"restart_policy": {"stall_floor": "soon"}}, "restart_policy.stall_floor: "
                                                          "expected a duration"),
            ({"workers": {"min": 2 ** 40}}, "workers.min: 1099511627776 is out of range"),
        ]
        for spec, want in cases:
            with self.assertRaises(bc.InvalidArgument) as e:
                bc.to_job_spec(spec)
            self.assertIn(want, str(e.exception))
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.load_job_file(path, overrides={"workers.min": 3, "trainer.x": 1})
        self.assertIn("trainer.x: unknown field", str(e.exception))

    def test_queue_priority_and_preemptible(self):
        spec = bc.to_job_spec(dict(MNIST, queue="team-a", priority="high", preemptible=False))
        self.assertEqual((spec.queue, spec.priority), ("team-a", "high"))
        self.assertTrue(spec.HasField("preemptible"))
        self.assertFalse(spec.preemptible)
        # A priority is a class name or an integer, in a dict as in a job file.
        self.assertEqual(bc.to_job_spec(dict(MNIST, priority=100)).priority, "100")
        self.assertEqual(bc.to_job_spec(MNIST, overrides={"priority": -5}).priority, "-5")
        self.assertFalse(bc.to_job_spec(MNIST).HasField("preemptible"))
        path = write(os.path.join(self.dir, "shared.yaml"), """\
            name: m
            workers: {min: 1}
            queue: team-b
            priority: 100
            preemptible: true
            """)
        spec = bc.load_job_file(path, overrides=["priority=low"])
        self.assertEqual((spec.queue, spec.priority, spec.preemptible), ("team-b", "low", True))
        self.assertEqual(bc.load_job_file(path).priority, "100")
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.to_job_spec(dict(MNIST, preemptible="no"))
        self.assertEqual(e.exception.field, "preemptible")
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.to_job_spec(dict(MNIST, priority=True))
        self.assertEqual(e.exception.field, "priority")

    def test_quoted_numbers_and_repeated_keys(self):
        path = write(os.path.join(self.dir, "q.yaml"), "workers: {min: '2'}\n")
        with self.assertRaises(bc.InvalidArgument):
            bc.load_job_file(path)
        path = write(os.path.join(self.dir, "r.yaml"), "name: a\nname: b\n")
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.load_job_file(path)
        self.assertIn("name: repeated key", str(e.exception))
        with self.assertRaises(bc.NotFound):
            bc.load_job_file(os.path.join(self.dir, "missing.yaml"))
        for text in ("name: x\0", "&a ,", "a: b\n---\nc: d\n", "[1, 2]"):
            path = write(os.path.join(self.dir, "bad.yaml"), text)
            with self.assertRaises(bc.InvalidArgument) as e:
                bc.load_job_file(path)
            self.assertTrue(str(e.exception).startswith(path), str(e.exception))
            self.assertNotIn("\n", str(e.exception))


def make_pki(directory, name):
    """A throwaway CA (DIR/NAME-ca.crt) and a server certificate for 127.0.0.1 and
    localhost signed by it; returns (ca path, key PEM, certificate PEM)."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=directory)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + "-ca.key", "-out",
        name + "-ca.crt", "-subj", "/CN=" + name + "-ca", "-days", "1")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
        name + ".csr", "-subj", "/CN=localhost")
    write(os.path.join(directory, name + ".ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", name + ".csr", "-CA", name + "-ca.crt", "-CAkey", name + "-ca.key",
        "-CAcreateserial", "-out", name + ".crt", "-days", "1", "-extfile", name + ".ext")
    with open(os.path.join(directory, name + ".key"), "rb") as f:
        key = f.read()
    with open(os.path.join(directory, name + ".crt"), "rb") as f:
        cert = f.read()
    return os.path.join(directory, name + "-ca.crt"), key, cert


class TlsTest(unittest.TestCase):
    """TLS against the CA of the selected context, with the context's token."""

    def test_context_with_ca_and_token(self):
        directory = tempfile.mkdtemp()
        ca, key, cert = make_pki(directory, "good")
        other_ca, _, _ = make_pki(directory, "other")
        fake = FakeCoordinator(tls=(key, cert)).start()
        self.addCleanup(fake.stop)
        fake.token = "t-tls"
        write(os.path.join(directory, "tls.token"), "t-tls\n")
        config = write(os.path.join(directory, "config.yaml"), """\
            current_context: tls
            contexts:
              tls: {coordinator: "%s", ca: %s, token_file: %s/tls.token}
            """ % (fake.address, ca, directory))
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
        env["BATON_CONFIG"] = config
        patch = mock.patch.dict(os.environ, env, clear=True)
        patch.start()
        self.addCleanup(patch.stop)
        with bc.Client() as client:
            self.assertFalse(client.connection.insecure)
            self.assertEqual(client.version().version, "0.15.0")
        self.assertEqual(fake.metadata[-1][1]["authorization"], "Bearer t-tls")
        with bc.Client(ca=other_ca, retries=0) as client:  # the certificate does not chain
            with self.assertRaises(bc.Unavailable):
                client.version()
        with self.assertRaises(bc.FailedPrecondition):
            bc.Client(ca=os.path.join(directory, "missing.crt"))


class ErrorMappingTest(unittest.TestCase):
    def test_codes_to_classes(self):
        from baton._errors import error_for
        self.assertIsInstance(error_for("NOT_FOUND", "x"), LookupError)
        self.assertIsInstance(error_for("UNAUTHENTICATED", "x"), bc.AuthError)
        self.assertIsInstance(error_for("PERMISSION_DENIED", "x"), bc.AuthError)
        self.assertIsInstance(error_for("UNAVAILABLE", "x"), ConnectionError)
        self.assertIsInstance(error_for("DEADLINE_EXCEEDED", "x"), TimeoutError)
        self.assertIs(type(error_for("DATA_LOSS", "x")), bc.BatonError)
        e = error_for("INVALID_ARGUMENT", "trainer.lr: must be > 0")
        self.assertEqual((e.code, e.field, str(e)), ("INVALID_ARGUMENT", "trainer.lr",
                                                     "trainer.lr: must be > 0"))


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeCoordinator().start()
        self.addCleanup(self.fake.stop)
        self.client = bc.Client(self.fake.address, insecure=True, timeout=5, backoff=0.01,
                                retries=3)
        self.addCleanup(self.client.close)

    def submit(self):
        return self.client.submit(MNIST)

    def test_submit_forms_and_token(self):
        self.fake.token = "t-1"
        with self.assertRaises(bc.Unauthenticated) as e:
            self.submit()
        self.assertIn("no bearer token", str(e.exception))
        self.assertEqual(e.exception.code, "UNAUTHENTICATED")
        client = bc.Client(self.fake.address, insecure=True, token="t-1")
        self.addCleanup(client.close)
        job = client.submit(MNIST)
        self.assertEqual((job.id, job.state), ("j-000001", bc.JOB_STATE_QUEUED))
        self.assertEqual(self.fake.metadata[-1][1]["authorization"], "Bearer t-1")
        spec = job_pb2.JobSpec(name="m", workers=job_pb2.WorkerRange(min=1))
        self.assertEqual(client.submit(spec).spec, spec)
        with self.assertRaises(TypeError):
            client.submit(spec, overrides={"name": "x"})
        with self.assertRaises(bc.Unauthenticated) as e:
            bc.Client(self.fake.address, insecure=True, token="wrong").get("j-000001")
        self.assertIn("not valid", str(e.exception))

    def test_submit_retries_with_the_same_request_id(self):
        self.fake.fail("SubmitJob", grpc.StatusCode.UNAVAILABLE, "Socket closed", times=2)
        job = self.submit()
        ids = {r.request_id for r in self.fake.calls("SubmitJob")}
        self.assertEqual(len(self.fake.calls("SubmitJob")), 3)
        self.assertEqual(ids, {job.request_id})
        again = self.client.submit(MNIST, request_id=job.request_id)
        self.assertEqual(again.id, job.id)
        with self.assertRaises(bc.AlreadyExists):
            self.client.submit(MNIST, request_id=job.request_id,
                               overrides={"workers.min": 2})

    def test_errors_are_mapped_without_grpc_noise(self):
        with self.assertRaises(bc.NotFound) as e:
            self.client.get("j-9")
        self.assertEqual(str(e.exception), "job j-9 not found")
        with self.assertRaises(bc.InvalidArgument) as e:
            self.client.submit(MNIST, overrides={"workers.min": 0})
        self.assertEqual(e.exception.field, "workers.min")
        self.fake.fail("GetJob", grpc.StatusCode.UNAVAILABLE, "failed to connect to all "
                       "addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Connection refused",
                       times=10)
        with self.assertRaises(bc.Unavailable) as e:
            self.client.get("j-1")
        self.assertEqual(str(e.exception), "cannot reach the coordinator at %s (Connection "
                         "refused)" % self.fake.address)
        self.assertEqual(len(self.fake.calls("GetJob")), 1 + 1 + 3)  # NotFound, 1 + retries
        job = self.submit()
        self.client.cancel(job.id, reason="test")
        with self.assertRaises(bc.FailedPrecondition):
            self.client.cancel(job.id)

    def test_unreachable_coordinator(self):
        self.fake.stop()
        client = bc.Client(self.fake.address, insecure=True, timeout=5, backoff=0.01,
                           retries=1)
        with self.assertRaises(bc.Unavailable) as e:
            client.version()
        self.assertIn("cannot reach the coordinator at " + self.fake.address, str(e.exception))

    def test_jobs_pages_states_and_limit(self):
        for _ in range(5):
            self.submit()
        self.fake.finish("j-000002", bc.JOB_STATE_SUCCEEDED)
        ids = [j.id for j in self.client.jobs(page_size=2)]
        self.assertEqual(ids, ["j-000005", "j-000004", "j-000003", "j-000002", "j-000001"])
        self.assertEqual(len(self.fake.calls("ListJobs")), 3)
        self.assertEqual([j.id for j in self.client.jobs(limit=3, page_size=2)],
                         ["j-000005", "j-000004", "j-000003"])
        self.assertEqual([j.id for j in self.client.jobs(states="succeeded")], ["j-000002"])
        self.assertEqual(len(list(self.client.jobs(states=["QUEUED",
                                                           bc.JOB_STATE_SUCCEEDED]))), 5)
        with self.assertRaises(bc.InvalidArgument):
            self.client.jobs(states=["sleeping"])

    def updates(self, job_id, seqs):
        out = []
        for seq in seqs:
            if seq % 2:
                out.append(job_service_pb2.JobUpdate(seq=seq, event=job_pb2.JobEvent(
                    reason="E%d" % seq)))
            else:
                out.append(job_service_pb2.JobUpdate(seq=seq, metric=job_pb2.MetricPoint(
                    step=seq * 10, values={"loss": 1.0 / seq})))
        self.fake.add_updates(job_id, out)

    def test_watch_resumes_after_unavailable(self):
        job = self.submit()
        self.updates(job.id, range(1, 7))
        self.fake.finish(job.id, bc.JOB_STATE_SUCCEEDED)
        self.fake.break_watch_after(3, times=2)  # snapshot + 2 updates, twice
        seen = list(self.client.watch(job.id))
        seqs = [u.seq for u in seen if u.seq]
        self.assertEqual(seqs, [1, 2, 3, 4, 5, 6])
        self.assertEqual([r.after_seq for r in self.fake.calls("WatchJob")], [0, 2, 4])
        self.assertEqual(seen[-1].snapshot.state, bc.JOB_STATE_SUCCEEDED)
        steps = [u.metric.step for u in seen if u.WhichOneof("update") == "metric"]
        self.assertEqual(steps, [20, 40, 60])

    def test_watch_gives_up_after_retries(self):
        job = self.submit()
        self.updates(job.id, [1])
        self.fake.break_watch_after(1, times=10)  # only the snapshot, every time
        with self.assertRaises(bc.Unavailable):
            list(self.client.watch(job.id, after_seq=1))
        self.assertEqual(len(self.fake.calls("WatchJob")), 4)
        with self.assertRaises(bc.NotFound):
            list(self.client.watch("j-404"))

    def test_wait(self):
        job = self.submit()
        with self.assertRaises(bc.DeadlineExceeded) as e:
            self.client.wait(job.id, timeout=0.2)
        self.assertIsInstance(e.exception, TimeoutError)
        threading.Timer(0.2, self.fake.finish, (job.id, bc.JOB_STATE_FAILED)).start()
        self.assertEqual(self.client.wait(job.id, timeout=30).state, bc.JOB_STATE_FAILED)

    def test_logs_sends_the_filters(self):
        job = self.submit()
        self.fake.logs[job.id] = [job_pb2.LogLine(seq=i, rank=i % 2, text="line %d" % i)
                                  for i in range(1, 7)]
        self.assertEqual([l.text for l in self.client.logs(job.id, rank=1, tail=2)],
                         ["line 3", "line 5"])
        since = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
        list(self.client.logs(job.id, follow=True, since=since))
        request = self.fake.calls("GetLogs")[-1]
        self.assertTrue(request.follow)
        self.assertEqual(request.since.ToDatetime(), datetime.datetime(2024, 5, 1, 12, 0))
        list(self.client.logs(job.id, since=datetime.timedelta(minutes=5)))
        ago = (datetime.datetime.utcnow() - self.fake.calls("GetLogs")[-1].since.ToDatetime())
        self.assertTrue(datetime.timedelta(minutes=4) < ago < datetime.timedelta(minutes=6))
        self.assertEqual(list(self.client.logs(job.id, rank=5)), [])
        with self.assertRaises(TypeError):
            self.client.logs(job.id, since=300)
        self.fake.fail("GetLogs", grpc.StatusCode.UNAVAILABLE, "Socket closed")
        self.assertEqual([l.seq for l in self.client.logs(job.id, tail=1)], [6])
        self.assertEqual(self.fake.calls("GetLogs")[-1].tail, 1)  # nothing was sent yet

    def test_workers_and_version(self):
        self.fake.workers = [job_pb2.Worker(id="w1", state=job_pb2.WORKER_STATE_READY)]
        self.assertEqual([w.id for w in self.client.workers()], ["w1"])
        self.assertEqual(self.client.version().version, "0.15.0")
        self.fake.fail("GetVersion", grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        with self.assertRaises(bc.Unimplemented):
            self.client.version()

    def test_submit_to_a_queue(self):
        job = self.client.submit(dict(MNIST, queue="team-a", priority=1000, preemptible=False))
        sent = self.fake.calls("SubmitJob")[-1].spec
        self.assertEqual((sent.queue, sent.priority), ("team-a", "1000"))
        self.assertTrue(sent.HasField("preemptible") and not sent.preemptible)
        self.assertEqual(job.spec.queue, "team-a")

    def test_queues(self):
        queues = self.client.queues()  # no queue file
        self.assertFalse(queues.configured)
        self.assertEqual(list(queues.queues), [])
        self.fake.queues = job_service_pb2.ListQueuesResponse(
            configured=True, default_queue="team-a",
            queues=[job_service_pb2.QueueStatus(
                name="team-a", cohort="research",
                nominal=job_service_pb2.QueueQuantity(slots=8, gpus=2),
                used=job_service_pb2.QueueQuantity(slots=10),
                borrowed=job_service_pb2.QueueQuantity(slots=2),
                pending_jobs=1, admitted_jobs=3, preemptions=1, users=["*"])],
            priority_classes=[job_service_pb2.PriorityClass(name="high", value=1000)])
        queues = self.client.queues()
        self.assertIsInstance(queues, bc.ListQueuesResponse)
        self.assertTrue(queues.configured)
        self.assertEqual(queues.default_queue, "team-a")
        team_a = queues.queues[0]
        self.assertIsInstance(team_a, bc.QueueStatus)
        self.assertEqual((team_a.name, team_a.nominal.slots, team_a.nominal.gpus,
                          team_a.borrowed.slots, team_a.pending_jobs),
                         ("team-a", 8, 2, 2, 1))
        self.assertEqual([(c.name, c.value) for c in queues.priority_classes], [("high", 1000)])
        # Read-only and idempotent: retried like workers().
        self.fake.fail("ListQueues", grpc.StatusCode.UNAVAILABLE, "Socket closed")
        self.assertTrue(self.client.queues().configured)
        self.fake.fail("ListQueues", grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        with self.assertRaises(bc.Unimplemented) as e:
            self.client.queues()
        self.assertEqual(e.exception.code, "UNIMPLEMENTED")
        self.assertIn("predates queues (it has no ListQueues)", str(e.exception))
        self.fake.fail("ListQueues", grpc.StatusCode.PERMISSION_DENIED, "user eve may not read")
        with self.assertRaises(bc.PermissionDenied):
            self.client.queues()

    def test_cordon_and_uncordon(self):
        self.fake.workers = [job_pb2.Worker(id="w1", state=job_pb2.WORKER_STATE_READY)]
        self.assertEqual(self.client.cordon("w1", "NIC errors").cordon.reason, "NIC errors")
        self.assertEqual(self.fake.calls("CordonWorker")[-1].reason, "NIC errors")
        self.assertFalse(self.client.uncordon("w1").HasField("cordon"))
        with self.assertRaises(bc.NotFound):
            self.client.cordon("w9")

    def test_context_manager_closes(self):
        with bc.Client(self.fake.address, insecure=True) as client:
            self.assertEqual(client.version().protocol_version, 4)
        with self.assertRaises(Exception):
            client.version()


if __name__ == "__main__":
    unittest.main()
