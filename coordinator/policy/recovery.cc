#include "coordinator/policy/recovery.h"

#include <set>

namespace baton::coordinator {

StopDecision DecideStop(const StopFacts& facts) {
  StopDecision d;
  d.all_stopped = true;
  for (const StoppingRank& r : facts.ranks) {
    if (!r.exited && !r.processes_stopped) d.all_stopped = false;
  }
  if (d.all_stopped) {
    d.stopped = true;
    return d;
  }
  if (facts.now < facts.failed_at + facts.stop_wait) return d;
  // Never a new generation beside a live one: wait for leases to run out, revoking those
  // of connected workers whose processes ignore the stop. Only workers without leases are
  // given up on.
  bool waiting = false;
  std::set<std::string> revoked;
  for (const StoppingRank& r : facts.ranks) {
    if (r.exited || r.processes_stopped) continue;
    if (!r.connected) {
      waiting = true;  // Lost: its lease is still running out.
    } else if (r.leased) {
      waiting = true;
      if (facts.now < r.connected_since + facts.stop_wait) continue;
      if (revoked.insert(r.worker).second) d.revoke.push_back(r);
    }
  }
  d.stopped = !waiting;
  return d;
}

NextGeneration DecideNextGeneration(const NextGenerationFacts& facts) {
  if (facts.now < facts.restart_at) return NextGeneration::kWait;
  if (facts.gang_found) return NextGeneration::kRendezvous;
  if (facts.now < facts.restart_at + facts.rendezvous_timeout) return NextGeneration::kWait;
  return NextGeneration::kFail;
}

}  // namespace baton::coordinator
