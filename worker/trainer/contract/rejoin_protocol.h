#pragma once

// Keeping a healthy rank alive when a peer is lost: the trainer's side of in-process
// recovery. A rank started with BATON_REJOIN_FD (a pipe the worker writes to) does not exit
// when a collective fails because a peer is gone (UNAVAILABLE, RejoinableFailure): it says
// so on stdout, drops its communicator and its training session, and blocks reading the fd
// for the next generation it belongs to; then it joins that generation in the same process
// (a new rendezvous under the new generation's store prefix, the restore from the newest
// in-memory snapshot any rank holds, as a restarted gang restores). It keeps the process,
// its loaded libraries, data set and device context; the replacement of the lost rank is
// the only process that starts.
//
// The fd may be one end of a socket pair: the rank then also writes, once it waits,
// "waiting <generation>\n" (AnnounceWaiting), so that the worker knows the process holds
// nothing of that generation any more (no communicator, no session) and may keep it for
// the next. A SIGTERM while it waits ends it at once (the stop flag, ReadRejoin's `stop`).
//
// Wire format: one message per generation, "KEY=VALUE" lines ended by an empty line, with
// exactly these keys, each once:
//   BATON_GENERATION  greater than the rank's current generation
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT
// validated as the launch environment is (launch_env.h). BATON_JOB_ID and BATON_METRICS_FD
// stay those the rank was launched with. EOF before a message: the rank is in no further
// generation and exits with the error that ended its run.
// Plain C++, no LibTorch; thread-compatible.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/contract/launch_env.h"

namespace baton::trainer {

// Largest accepted message.
inline constexpr size_t kMaxRejoinMessageBytes = 4096;

// Whether a run that failed with `status` may rejoin a next generation: a peer was lost
// (UNAVAILABLE from a collective or the rendezvous). Anything else (a user error, a
// superseded generation, a device error) ends the process as before.
bool RejoinableFailure(const absl::Status& status);

// The message telling a rank its part in `next` (the fields the wire format lists).
std::string EncodeRejoin(const LaunchEnv& next);

// The message for the launch environment `env` ("KEY=VALUE" entries, as the worker builds
// for a fresh launch of the rank: its wire-format keys are taken). INVALID_ARGUMENT as
// ParseLaunchEnv for a malformed one.
absl::StatusOr<std::string> EncodeRejoinFromEnv(const std::vector<std::string>& env);

// The generation in a "waiting <generation>" line (without its newline); nullopt for any
// other line. Leading 'L' bytes are skipped: a rank started from a warm standby keeps the
// standby's stdin socket, on which the standby's "loaded" byte (standby_protocol.h) may
// come first.
std::optional<int64_t> ParseWaitingLine(absl::string_view line);

// Writes "waiting <generation>\n" to `fd`. Best effort: an fd that cannot be written (the
// read end of a pipe) is ignored.
void AnnounceWaiting(int fd, int64_t generation);

// Blocks until a whole message was read from `fd`, then returns the launch environment of
// the next generation: `current` with the message's fields. nullopt at EOF before the first
// byte. CANCELLED when a signal interrupts the read and `stop` (if given) is set. DATA_LOSS for EOF
// inside a message or one over kMaxRejoinMessageBytes; INVALID_ARGUMENT naming the key for an
// unknown, repeated or missing key, a malformed value (as ParseLaunchEnv) or a generation not above
// `current`'s; INTERNAL for read errors. Reads nothing past the message.
absl::StatusOr<std::optional<LaunchEnv>> ReadRejoin(int fd, const LaunchEnv& current,
                                                    const std::atomic<bool>* stop = nullptr);

// Sets the process environment's variables of the wire format to `env`'s values, so that
// what reads the environment later (a library, a child) sees the generation the rank is in.
void ExportRejoinEnv(const LaunchEnv& env);

}  // namespace baton::trainer
