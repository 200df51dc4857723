"""Unit tests of the in-script helper `baton` (client/python/baton).

The line format is checked against the built-in trainer's (worker/trainer/contract/
metrics_writer_test.cc has the same cases). Reports, the signal handler installed at import
and the environment are checked in child processes, each with a fresh module.
"""

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)  # client/python
sys.path.insert(0, PACKAGE_ROOT)

import baton  # noqa: E402


def run_child(code, env=None, pass_fds=()):
    """Runs `code` in a fresh python3 that imports baton from this tree; returns stdout."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("BATON_") and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                            "LOCAL_WORLD_SIZE")}
    full_env["PYTHONPATH"] = PACKAGE_ROOT
    full_env.update(env or {})
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          pass_fds=pass_fds, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError("child failed (%d): %s" % (done.returncode, done.stderr))
    return done.stdout


def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode("utf-8")
        chunks.append(chunk)


class FormatTest(unittest.TestCase):
    def test_same_lines_as_the_trainer(self):
        f = baton.format_metrics_line
        self.assertEqual(f([("step", 10), ("epoch", 0), ("loss", 0.25), ("lr", 0.05)]),
                         '{"step":10,"epoch":0,"loss":0.25,"lr":0.05}\n')
        self.assertEqual(f([("samples_per_sec", 12345.678901234)]),
                         '{"samples_per_sec":12345.6789}\n')
        self.assertEqual(f([("step", 3e15)]), '{"step":3000000000000000}\n')
        self.assertEqual(f([("big", 1e17)]), '{"big":1e+17}\n')
        self.assertEqual(f([]), "{}\n")
        self.assertEqual(f([("loss", float("nan")), ("step", 1), ("rate", float("inf"))]),
                         '{"step":1}\n')
        self.assertEqual(f([('a"b\\c\n', 1)]), '{"a\\"b\\\\c\\n":1}\n')
        self.assertEqual(f([("x\x01", 1)]), '{"x\\u0001":1}\n')

    def test_values_must_be_numbers(self):
        self.assertEqual(baton.format_metrics_line([("ok", True)]), '{"ok":1}\n')
        with self.assertRaises(TypeError):
            baton.format_metrics_line([("loss", "low")])

    def test_checkpoint_exit_code_is_the_contract(self):
        self.assertEqual(baton.CHECKPOINT_EXIT_CODE, 75)


class ReportTest(unittest.TestCase):
    def test_lines_go_to_the_metrics_fd(self):
        r, w = os.pipe()
        try:
            out = run_child("""
                import baton
                print(baton.report(step=1, loss=2.5))
                print(baton.report(step=3, loss=1.25, samples=128, epoch=0, accuracy=0.5))
                print(baton.report(step=4, samples_per_sec=7, time_step_s=0.5))
                class Index:  # a step with __index__, like a numpy integer
                    def __index__(self):
                        return 5
                print(baton.report(step=Index()))
                """, env={"BATON_METRICS_FD": str(w)}, pass_fds=(w,))
        finally:
            os.close(w)
        lines = read_all(r).splitlines()
        os.close(r)
        self.assertEqual(out.split(), ["True", "True", "True", "True"])
        self.assertEqual(lines[0], '{"step":1,"loss":2.5}')
        # The second line measures the window since the first: a rate and seconds per step.
        import json
        second = json.loads(lines[1])
        self.assertEqual(list(second), ["step", "loss", "samples_per_sec", "time_step_s",
                                        "epoch", "accuracy"])
        self.assertEqual(second["step"], 3)
        self.assertGreater(second["samples_per_sec"], 0)
        self.assertGreaterEqual(second["time_step_s"], 0)
        # Keys given by the caller are written as given, not computed.
        self.assertEqual(lines[2], '{"step":4,"samples_per_sec":7,"time_step_s":0.5}')
        self.assertTrue(lines[3].startswith('{"step":5,"time_step_s":'), lines[3])

    def test_no_op_outside_baton(self):
        out = run_child("""
            import baton
            print(baton.report(step=1, loss=0.5, samples=10))
            print(baton.rank_info())
            """)
        self.assertEqual(out.splitlines()[0], "False")
        self.assertIn("rank=0, world_size=1, local_rank=0, local_world_size=1, job_id=None, "
                      "generation=0, checkpoint_dir=None", out)

    def test_bad_step_and_bad_fd_are_errors(self):
        with self.assertRaises(ValueError):
            baton.report(step=-1)
        with self.assertRaises(ValueError):
            baton.report(step=1.5)
        with self.assertRaises(ValueError):
            baton.report(step=True)
        out = run_child("""
            import baton
            try:
                baton.report(step=1)
            except ValueError as e:
                print(e)
            """, env={"BATON_METRICS_FD": "987"})
        self.assertIn("BATON_METRICS_FD='987' is not an open file descriptor", out)

    def _lease_page(self, deadline_ns):
        """A lease page as the worker makes one: a memfd holding the deadline."""
        fd = os.memfd_create("lease", 0)
        os.write(fd, struct.pack("=q", deadline_ns))
        self.addCleanup(os.close, fd)
        return fd

    def test_report_stops_the_process_once_the_lease_ran_out(self):
        r, w = os.pipe()
        past = self._lease_page(time.clock_gettime_ns(time.CLOCK_BOOTTIME) - 10**9)
        script = textwrap.dedent("""
            import baton
            print("expired", baton.lease_expired(), flush=True)
            baton.report(step=1)
            print("still running", flush=True)
            """)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
        env.update(PYTHONPATH=PACKAGE_ROOT, BATON_METRICS_FD=str(w), BATON_LEASE_FD=str(past))
        done = subprocess.run([sys.executable, "-c", script], env=env, pass_fds=(w, past),
                              capture_output=True, text=True, timeout=60)
        os.close(w)
        self.assertEqual(done.returncode, baton.FENCED_EXIT_CODE, done.stderr)
        self.assertEqual(done.stdout, "expired True\n")
        self.assertIn("lease ran out", done.stderr)
        self.assertEqual(read_all(r), "", "nothing reported after the lease ran out")
        os.close(r)

    def test_report_goes_on_while_the_lease_holds(self):
        r, w = os.pipe()
        future = self._lease_page(time.clock_gettime_ns(time.CLOCK_BOOTTIME) + 3600 * 10**9)
        try:
            out = run_child("""
                import baton
                print(baton.lease_expired(), baton.report(step=1))
                """, env={"BATON_METRICS_FD": str(w), "BATON_LEASE_FD": str(future)},
                pass_fds=(w, future))
        finally:
            os.close(w)
        self.assertEqual(out, "False True\n")
        self.assertEqual(read_all(r), '{"step":1}\n')
        os.close(r)
        out = run_child("""
            import baton
            try:
                baton.lease_expired()
            except ValueError as e:
                print(e)
            """, env={"BATON_LEASE_FD": "987"})
        self.assertIn("BATON_LEASE_FD='987' is not a lease page", out)

    def test_reader_gone_disables_reports(self):
        r, w = os.pipe()
        os.close(r)
        try:
            out = run_child("""
                import baton
                print(baton.report(step=1), baton.report(step=2))
                """, env={"BATON_METRICS_FD": str(w)}, pass_fds=(w,))
        finally:
            os.close(w)
        self.assertEqual(out.split(), ["False", "False"])


class CheckpointRequestTest(unittest.TestCase):
    def test_sigusr1_sets_the_flag_and_calls_back_under_baton(self):
        out = run_child("""
            import os, signal
            import baton
            calls = []
            baton.on_checkpoint_request(lambda: calls.append("called"))
            print(baton.checkpoint_requested())
            os.kill(os.getpid(), signal.SIGUSR1)
            print(baton.checkpoint_requested(), calls)
            print(baton.checkpoint_requested())  # it stays set
            """, env={"BATON_JOB_ID": "j-000001"})
        self.assertEqual(out.splitlines(), ["False", "True ['called']", "True"])

    def test_handler_is_installed_at_import_under_baton(self):
        # No call into the helper before the signal: the import alone must keep SIGUSR1
        # from killing the process.
        out = run_child("""
            import os, signal
            import baton
            os.kill(os.getpid(), signal.SIGUSR1)
            print(baton.checkpoint_requested())
            """, env={"BATON_JOB_ID": "j-000001"})
        self.assertEqual(out.strip(), "True")

    def test_import_keeps_a_handler_the_script_installed(self):
        out = run_child("""
            import os, signal
            seen = []
            signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
            import baton
            os.kill(os.getpid(), signal.SIGUSR1)
            print(seen == [signal.SIGUSR1])
            """, env={"BATON_JOB_ID": "j-000001"})
        self.assertEqual(out.strip(), "True")

    def test_outside_baton_import_installs_nothing(self):
        out = run_child("""
            import signal
            import baton
            print(signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL)
            """)
        self.assertEqual(out.strip(), "True")


class RankInfoTest(unittest.TestCase):
    def test_reads_the_environment(self):
        out = run_child("""
            import baton
            i = baton.rank_info()
            print(i.rank, i.world_size, i.local_rank, i.local_world_size, i.job_id,
                  i.generation, i.checkpoint_dir)
            """, env={"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                      "LOCAL_WORLD_SIZE": "2", "BATON_JOB_ID": "j-000007",
                      "BATON_GENERATION": "5", "BATON_CHECKPOINT_DIR": "/shared/ckpt"})
        self.assertEqual(out.split(), ["3", "4", "1", "2", "j-000007", "5", "/shared/ckpt"])

    def test_invalid_value_names_the_variable(self):
        out = run_child("""
            import baton
            try:
                baton.rank_info()
            except ValueError as e:
                print(e)
            """, env={"WORLD_SIZE": "two"})
        self.assertIn("WORLD_SIZE='two' is not an integer", out)


class SnapshotTest(unittest.TestCase):
    """The snapshot files (the format of worker/trainer/snapshot/snapshot_store.h)."""

    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        import shutil
        shutil.rmtree(self.dir)

    def test_two_slots_newest_first_and_a_torn_slot_is_skipped(self):
        from baton import _snapshot
        w = _snapshot.Writer(self.dir, "rank0")
        for step in (1, 2, 3):
            w.write(1, step, b"state %d" % step)
        refs = _snapshot.list_snapshots(self.dir)
        self.assertEqual([r.step for r in refs], [3, 2])
        self.assertEqual(_snapshot.read(refs[0]), b"state 3")
        # A writer killed mid-copy leaves the slot's sequence number odd.
        with open(refs[0].path, "r+b") as f:
            f.seek(64 + 64 * refs[0].slot)
            f.write(struct.pack("=Q", refs[0].seq + 1))
        self.assertEqual([r.step for r in _snapshot.list_snapshots(self.dir)], [2])
        w.write(1, 4, b"state 4")  # Into the torn slot: step 2 stays.
        self.assertEqual([r.step for r in _snapshot.list_snapshots(self.dir)], [4, 2])
        # A later generation's writer keeps the file's snapshots until it writes.
        w.close()
        w2 = _snapshot.Writer(self.dir, "rank0")
        w2.write(2, 5, b"x" * 100000)  # Larger: the file is replaced with larger slots.
        refs = _snapshot.list_snapshots(self.dir)
        self.assertEqual(refs[0].generation, 2)
        self.assertEqual(_snapshot.read(refs[0]), b"x" * 100000)

    def test_a_slot_rewritten_after_listing_is_not_returned(self):
        from baton import _snapshot
        w = _snapshot.Writer(self.dir, "rank0")
        w.write(1, 1, b"a")
        w.write(1, 2, b"b")
        older = _snapshot.list_snapshots(self.dir)[1]
        w.write(1, 3, b"c")
        self.assertIsNone(_snapshot.read(older))

    def test_snapshot_then_restore_in_one_process(self):
        out = run_child("""
            import baton, torch
            assert baton.restore() is None
            state = {"w": torch.arange(6.0).reshape(2, 3), "step": 7}
            assert baton.snapshot(state, 7)
            assert baton.snapshot(dict(state, step=8), 8)
            step, got = baton.restore()
            print(step, got["step"], torch.equal(got["w"], state["w"]))
            print(baton.restore(newer_than=8))
        """, env={"BATON_SNAPSHOT_DIR": self.dir, "BATON_GENERATION": "3", "LOCAL_RANK": "0"})
        self.assertEqual(out.split("\n")[:2], ["8 8 True", "None"])

    def test_only_local_rank_0_writes_and_outside_baton_nothing(self):
        out = run_child("""
            import baton
            print(baton.snapshot({"a": 1}, 1))
        """, env={"BATON_SNAPSHOT_DIR": self.dir, "LOCAL_RANK": "1"})
        self.assertEqual(out.strip(), "False")
        out = run_child("""
            import baton
            print(baton.snapshot({"a": 1}, 1))
        """)
        self.assertEqual(out.strip(), "False")
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    unittest.main()
