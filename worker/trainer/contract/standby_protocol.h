#pragma once

// The warm-standby handoff between baton-worker and a pre-started trainer process.
//
// The worker starts `<trainer> --standby` with stdin on a stream socket. The standby lets the
// dynamic loader and its libraries' static initialisers run (about a second for LibTorch),
// then says so by writing kStandbyLoaded to stdin (the socket is bidirectional; see
// SignalStandbyLoaded) and blocks reading stdin. To launch a rank the worker writes one
// StandbyRequest: the argv, complete environment and working directory a fresh exec would
// have been given. The standby applies it (ApplyStandbyRequest) and continues as if it had
// been exec'd with it. EOF before a request means "not needed": the standby exits 0
// without output.
//
// Wire format (one request, then the worker closes its end):
//   "BSR1"  uint32 payload length (host byte order; both ends run on one host)
//   payload: argc, each argv entry, envc, each env entry, working_dir; every field a
//            NUL-terminated string, counts in decimal.
// "BSR2" instead of "BSR1": a confined request. Its first byte carries one fd (SCM_RIGHTS),
// a Landlock ruleset (worker/process/fs_isolation.h); the standby confines itself with it
// (no_new_privs, landlock_restrict_self) before it reads the payload, exactly as the cold
// launcher confines a forked rank before exec. Landlock binds only the calling thread and
// those it starts later, so each other thread of the standby (OpenBLAS's pool, started when
// the library loads unless OMP_NUM_THREADS=1) confines itself too, in a handler of a
// real-time signal (SIGRTMAX - 2) sent to it alone; the standby reads nothing more until
// every thread did.
// Plain C++, no LibTorch; thread-compatible.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::trainer {

// argv[1] that selects standby mode (as the only argument).
inline constexpr char kStandbyFlag[] = "--standby";

// The byte a standby writes to its stdin socket once its libraries are loaded, so that the
// worker prefers loaded standbys and can report them.
inline constexpr char kStandbyLoaded = 'L';

// Writes kStandbyLoaded to `fd` (the standby's stdin socket). Best effort: a stdin that is
// not a socket (someone runs --standby by hand) is ignored.
void SignalStandbyLoaded(int fd);

// Largest accepted payload; larger requests are rejected on both ends.
inline constexpr size_t kMaxStandbyRequestBytes = 64 << 20;

struct StandbyRequest {
  std::vector<std::string> argv;  // Non-empty; argv[0] is the program as the caller named it.
  std::vector<std::string> env;   // The complete environment, "KEY=VALUE".
  std::string working_dir;        // Empty: stay in the standby's directory.
  // Encoding: the request is sent as "BSR2" with a ruleset fd (the sender attaches it).
  // Decoding: the standby confined itself with the ruleset before reading the payload.
  bool confined = false;
};

// The request on the wire. INVALID_ARGUMENT for an empty argv, a string with a NUL byte or a
// payload over kMaxStandbyRequestBytes.
absl::StatusOr<std::string> EncodeStandbyRequest(const StandbyRequest& request);

// Blocks until one request was read from `fd`. nullopt when `fd` reaches EOF before the first
// byte (the launcher let the standby go). A confined request ("BSR2") confines this
// process first. DATA_LOSS for EOF inside a request, a malformed one or a confined one
// without its ruleset; FAILED_PRECONDITION "cannot confine ..." when the confinement
// fails (the cold launcher's wording); INTERNAL for a read error. Reads nothing past the
// request.
absl::StatusOr<std::optional<StandbyRequest>> ReadStandbyRequest(int fd);

// Whether a launch with environment `env` keeps the standby's stdin socket rather than
// /dev/null: its stdin is the rank's rejoin channel (BATON_REJOIN_FD=0, rejoin_protocol.h),
// whose worker end the launcher hands back.
bool StdinIsRejoinSocket(const std::vector<std::string>& env);

// Makes this process look as if it had been exec'd with `request`: stdin reopened on
// /dev/null (kept, when the request's environment has BATON_REJOIN_FD=0: the socket is the
// rank's rejoin channel, and the launcher hands the worker's end back), the working
// directory changed and the environment replaced (clearenv + putenv; the strings are leaked
// on purpose, the environment points into them; BATON_LEASE_FD keeps this process's own
// value, as the fd is the one it was started with). Call it before any other thread may
// read the environment. Errors: NOT_FOUND/PERMISSION_DENIED/INTERNAL from chdir with the
// reason, whose message is the one the cold launcher prints; INTERNAL when /dev/null cannot
// be opened.
absl::Status ApplyStandbyRequest(const StandbyRequest& request);

}  // namespace baton::trainer
