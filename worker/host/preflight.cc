#include "worker/host/preflight.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/time/proto_time.h"
#include "worker/host/host_checks.h"
#include "worker/host/link_test.h"

namespace baton::worker {

baton::v1::PreflightResult RunPreflight(const baton::v1::RunPreflight& req,
                                        const PreflightHost& host, Clock* clock) {
  baton::v1::PreflightResult result;
  result.set_job_id(req.job_id());
  result.set_generation(req.generation());
  result.set_round(req.round());
  LinkTestOptions link;
  link.window = FromProto(req.link_window());
  link.connect_timeout =
      req.has_connect_timeout() ? FromProto(req.connect_timeout()) : host.connect_timeout;
  std::vector<baton::v1::LinkMeasurement> links(req.send_to_size());
  std::vector<std::thread> threads;
  for (int i = 0; i < req.send_to_size(); ++i) {
    if (i >= kMaxPreflightLinks) {
      links[i].set_peer_worker_id(req.send_to(i).worker_id());
      links[i].set_error(absl::StrCat("not measured: more than ", kMaxPreflightLinks,
                                      " links in one RunPreflight"));
      continue;
    }
    threads.emplace_back([&, i] { links[i] = MeasureLink(req.send_to(i), link, clock); });
  }
  *result.add_checks() = CheckSharedMemory(host.shm_dir, host.shm_bytes);
  if (host.registered_gpus > 0) {
    *result.add_checks() = CheckGpus(
        host.registered_gpus, host.detect_gpus ? host.detect_gpus() : std::vector<baton::v1::Gpu>(),
        QueryNvml());
  }
  for (std::thread& t : threads) t.join();
  for (baton::v1::LinkMeasurement& l : links) *result.add_links() = std::move(l);
  return result;
}

}  // namespace baton::worker
