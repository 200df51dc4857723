"""Unit tests of baton.client with a coordinator run as several replicas: the address
list, and calls following the leader a standby names (tests/testing/fake_coordinator.py
plays the replicas, on real loopback ports).

Needs the package tree with the generated stubs on sys.path: $BATON_PYTHON_PACKAGE, else
the Bazel runfiles' client/python/package (//client/python:package).
"""

import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.environ.get("BATON_PYTHON_PACKAGE") or os.path.join(
    os.environ.get("TEST_SRCDIR", ""), "baton", "client", "python", "package")
sys.path.insert(0, PACKAGE)
sys.path.insert(0, HERE)

from baton import client as bc  # noqa: E402
from baton._connection import parse_addresses  # noqa: E402
from testing.fake_coordinator import FakeCoordinator  # noqa: E402

MNIST = {
    "name": "mnist",
    "trainer": {"model": "mlp", "dataset": "mnist", "data_dir": "data"},
    "workers": {"min": 1},
}


class AddressListTest(unittest.TestCase):
    def test_accepts_one_or_several_addresses(self):
        cases = {
            "head:7070": ["head:7070"],
            " 10.0.0.1:7070 , 10.0.0.2:7070": ["10.0.0.1:7070", "10.0.0.2:7070"],
            "[::1]:7070,[fd00::2]:65535": ["[::1]:7070", "[fd00::2]:65535"],
            "dns:///head:7070": ["dns:///head:7070"],
            "unix:/run/baton.sock": ["unix:/run/baton.sock"],
        }
        for text, want in cases.items():
            self.assertEqual(parse_addresses(text), want, text)
        self.assertEqual(parse_addresses(["a:1", " b:2"]), ["a:1", "b:2"])

    def test_rejects_bad_entries_naming_them_and_what_is_allowed(self):
        cases = {
            "": "no coordinator address given",
            "a:1,,b:2": "'a:1,,b:2' has an empty entry",
            "a:1,head": "'head' has no port",
            "[::1]": "'[::1]' has no port",
            ":7070": "':7070' has no host",
            "head:0": "'head:0' has port '0', not one in 1..65535",
            "head:65536": "has port '65536'",
            "head:7x": "has port '7x'",
            "::1:7070": "without brackets (write [::1]:7070)",
            "[::1:7070": "has an unclosed '['",
            "a:1, b:2 ,a:1": "'a:1' is listed twice",
            "unix:": "'unix:' has no path",
        }
        for text, want in cases.items():
            with self.assertRaises(bc.InvalidArgument) as e:
                parse_addresses(text)
            self.assertIn(want, str(e.exception), text)
            self.assertIn("allowed: HOST:PORT, [IPV6]:PORT", str(e.exception), text)

    def test_resolve_connection_takes_a_list_from_each_source(self):
        conn = bc.resolve_connection(["127.0.0.1:1", "127.0.0.1:2"], insecure=True,
                                     environ={})
        self.assertEqual(conn.coordinator, "127.0.0.1:1,127.0.0.1:2")
        self.assertEqual(conn.coordinators, ("127.0.0.1:1", "127.0.0.1:2"))
        conn = bc.resolve_connection(insecure=True,
                                     environ={"BATON_COORDINATOR": "[::1]:1, localhost:2"})
        self.assertEqual(conn.coordinators, ("[::1]:1", "localhost:2"))
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.resolve_connection(insecure=True, environ={"BATON_COORDINATOR": "a:1,a:1"})
        self.assertIn("BATON_COORDINATOR: coordinator address 'a:1' is listed twice",
                      str(e.exception))
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.resolve_connection("head", insecure=True, environ={})
        self.assertIn("coordinator=: coordinator address 'head' has no port", str(e.exception))
        # Plaintext needs every address on loopback.
        with self.assertRaises(bc.InvalidArgument) as e:
            bc.resolve_connection("127.0.0.1:1,10.0.0.2:7070", insecure=True, environ={})
        self.assertIn("the coordinator address is 10.0.0.2:7070", str(e.exception))


class FollowTheLeaderTest(unittest.TestCase):
    """A standby and a leader; the client lists the standby first."""

    def setUp(self):
        self.standby = FakeCoordinator().start()
        self.addCleanup(self.standby.stop)
        self.leader = FakeCoordinator().start()
        self.addCleanup(self.leader.stop)
        self.standby.become_standby(self.leader.address)
        # Backoff sleeps are recorded, not slept: an immediate retry records none.
        sleeps = mock.patch.object(bc.Client, "_sleep_backoff")
        self.sleeps = sleeps.start()
        self.addCleanup(sleeps.stop)

    def client(self, addresses, retries=3):
        client = bc.Client(addresses, insecure=True, timeout=10, retries=retries)
        self.addCleanup(client.close)
        return client

    def test_a_refusal_naming_the_leader_is_retried_there_at_once(self):
        client = self.client([self.standby.address, self.leader.address])
        job = client.submit(MNIST)
        # Submit is retried with the same request id, so the job exists once.
        self.assertEqual(len(self.standby.calls("SubmitJob")), 1)
        self.assertEqual([r.request_id for r in self.leader.calls("SubmitJob")],
                         [self.standby.calls("SubmitJob")[0].request_id])
        self.assertEqual(list(self.leader.jobs), [job.id])
        self.sleeps.assert_not_called()
        # Later calls go to the leader directly.
        self.assertEqual(client.get(job.id).id, job.id)
        self.assertEqual(self.standby.calls("GetJob"), [])

    def test_without_a_hint_in_the_list_the_next_address_is_tried_after_a_backoff(self):
        for hint in ("10.9.9.9:7070", None):
            self.standby.become_standby(hint)
            client = self.client("%s,%s" % (self.standby.address, self.leader.address))
            self.assertEqual(client.version().version, "0.15.0")
            self.sleeps.assert_called_once_with(1)
            self.sleeps.reset_mock()
        self.assertEqual(len(self.standby.calls("GetVersion")), 2)
        self.assertEqual(len(self.leader.calls("GetVersion")), 2)

    def test_no_leader_at_all_fails_after_the_retries_trying_each_address(self):
        self.leader.become_standby(None)
        self.standby.become_standby(None)
        client = self.client([self.standby.address, self.leader.address], retries=3)
        with self.assertRaises(bc.Unavailable) as e:
            client.workers()
        self.assertIn("is a standby; no leader is elected yet", str(e.exception))
        self.assertEqual(len(self.standby.calls("ListWorkers")), 2)
        self.assertEqual(len(self.leader.calls("ListWorkers")), 2)

    def test_cancel_is_not_retried_but_the_next_call_goes_to_the_leader(self):
        job = self.client(self.leader.address).submit(MNIST)
        client = self.client([self.standby.address, self.leader.address])
        with self.assertRaises(bc.Unavailable) as e:
            client.cancel(job.id)
        self.assertEqual(str(e.exception), "cannot reach the coordinator at %s (baton-coordinator "
                         "%s is a standby; the leader is %s)" % (
                             self.standby.address, self.standby.address, self.leader.address))
        self.assertEqual(self.leader.calls("CancelJob"), [])
        self.assertEqual(client.cancel(job.id).state, bc.JOB_STATE_CANCELLED)
        self.assertEqual(len(self.standby.calls("CancelJob")), 1)

    def test_a_watch_follows_the_leader(self):
        job = self.client(self.leader.address).submit(MNIST)
        self.leader.finish(job.id, bc.JOB_STATE_SUCCEEDED)
        client = self.client([self.standby.address, self.leader.address])
        updates = list(client.watch(job.id))
        self.assertEqual(updates[-1].snapshot.state, bc.JOB_STATE_SUCCEEDED)
        self.assertEqual(len(self.standby.calls("WatchJob")), 1)
        self.assertEqual(len(self.leader.calls("WatchJob")), 1)
        self.sleeps.assert_not_called()

    def test_after_the_leader_goes_away_the_next_leader_is_found(self):
        self.standby.become_leader()
        self.leader.become_standby(self.standby.address)
        first, second = self.standby, self.leader  # first leads, second is a standby
        client = self.client([first.address, second.address])
        self.assertEqual(client.version().version, "0.15.0")
        first.stop()
        second.become_leader()
        self.assertEqual(client.version().version, "0.15.0")
        self.assertEqual(len(second.calls("GetVersion")), 1)
        self.sleeps.assert_called_once_with(1)  # the refused address, then the next one


if __name__ == "__main__":
    unittest.main()
