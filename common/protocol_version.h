#pragma once

#include <cstdint>

namespace baton {

// Version of the coordinator <-> worker protocol (proto/baton/v1/worker_service.proto)
// spoken by this build. Bump it when a message's meaning changes; the coordinator
// accepts workers in [kMinWorkerProtocolVersion, kProtocolVersion].
// 2: Draining, Register.draining, RequestCheckpoint (planned resizes).
// 3: leases (Heartbeat.seq, HeartbeatAck, Registered.lease), AssignmentFailed,
//    Register.probe_port and StartAssignment.peers (peer reachability).
// 4: ProfileRanks/ProfileTrace (`baton profile`).
// 5: StopAssignment.keep_waiting_ranks, ProcessExit.kept_for_rejoin (healthy ranks kept
//    alive across a peer's failure).
// 6: RunPreflight/PreflightResult (pre-flight checks of a gang's hosts and links).
inline constexpr uint32_t kProtocolVersion = 6;
// The first version with RequestCheckpoint.
inline constexpr uint32_t kCheckpointRequestProtocolVersion = 2;
// The first version whose workers hold leases and probe their peers.
inline constexpr uint32_t kLeaseProtocolVersion = 3;
// The first version whose workers carry out ProfileRanks.
inline constexpr uint32_t kProfileProtocolVersion = 4;
// The first version whose workers keep ranks waiting for the next generation.
inline constexpr uint32_t kRejoinProtocolVersion = 5;
// The first version whose workers carry out RunPreflight.
inline constexpr uint32_t kPreflightProtocolVersion = 6;
inline constexpr uint32_t kMinWorkerProtocolVersion = 1;

}  // namespace baton
