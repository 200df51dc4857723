# Shared by baton-trainer's end-to-end tests. Source it with the test's arguments
# (<make_mnist> <baton-trainer>) from the runfiles directory Bazel starts the test in:
# it sets MAKE_MNIST and TRAINER (absolute paths), PY (Debian's python3, where
# python3-torch lives; not a pyenv python), makes a fresh work directory under TEST_TMPDIR
# the current directory (WORK), and defines fail, free_port and check_exactly_once.
MAKE_MNIST=$(realpath "$1")
TRAINER=$(realpath "$2")
PY=/usr/bin/python3
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/e2e.XXXXXX")
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }
# free_port: a loopback port the OS found free.
free_port() { "$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }

# check_exactly_once STEPS LAST [DISK_GEN DISK]: a two-rank run that was interrupted ("run":
# run.samples.<rank>, run-ckpt/final.pt) against the uninterrupted one ("ref"):
# * ref logged every step 1..STEPS, and so did run, but that rank 1 may miss LAST (and
#   DISK), a step it completed with rank 0 but was killed before logging (a restore from
#   memory, or from the disk checkpoint of that very step, resumed right after it);
# * at every step, run's entry of the highest generation trained on ref's samples; no
#   generation logged a step twice;
# * a step logged by several generations that restored from memory (all but DISK_GEN) is
#   LAST + 1, the step in flight; one that DISK_GEN (restored from the disk checkpoint of
#   step DISK) logged besides another generation comes after DISK;
# * the final weights are bit-identical.
check_exactly_once() {
  "$PY" - "$@" <<'PY' || fail "sample logs or final weights differ"
import sys, torch
steps, last = int(sys.argv[1]), int(sys.argv[2])
disk_gen, disk = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (None, None)
def entries(path):
    out = {}
    for line in open(path):
        gen, step, rank, ids = line.split()
        out.setdefault(int(step), []).append((int(gen), ids))
    return out
for rank in (0, 1):
    ref, run = entries(f"ref.samples.{rank}"), entries(f"run.samples.{rank}")
    assert sorted(ref) == list(range(1, steps + 1)), rank
    missing = set(range(1, steps + 1)) - set(run)
    assert not missing or (rank == 1 and missing <= {last, disk}), (rank, sorted(missing))
    for step, logged in run.items():
        assert max(logged)[1] == ref[step][0][1], (rank, step)
        gens = [g for g, _ in logged]
        assert len(gens) == len(set(gens)), (rank, step, logged)
        if len([g for g in gens if g != disk_gen]) > 1:
            assert step == last + 1, (rank, step, "trained twice across a restore from memory")
        if disk_gen in gens and len(gens) > 1:
            assert step > disk, (rank, step, "before the disk checkpoint, yet trained again")
a, b = torch.load("ref-ckpt/final.pt"), torch.load("run-ckpt/final.pt")
assert a.keys() == b.keys()
for k in a:
    assert torch.equal(a[k], b[k]), k
print("no step twice but the one in flight at a restore from memory; final weights bit-identical")
PY
}
