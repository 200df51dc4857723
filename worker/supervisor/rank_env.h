#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "baton/v1/job.pb.h"

namespace baton::worker {

// Everything the environment of one training process depends on.
struct RankEnvInput {
  // The worker's own environment, "KEY=VALUE" entries (e.g. from `environ`). Only the
  // names IsInheritedEnvName accepts reach the rank.
  std::vector<std::string> base_env;
  std::string job_id;
  int64_t generation = 0;
  int32_t world_size = 0;
  std::string master_addr;
  int32_t master_port = 0;
  // rank, local_rank, local_world_size and group_rank are used.
  baton::v1::RankInfo rank;
  // JobSpec.env.
  std::map<std::string, std::string> spec_env;
  // The fd number at which the child finds the write end of its metrics pipe.
  int metrics_fd = 3;
  // A command job's JobSpec.checkpoint_dir (empty: none, or a trainer job, which gets it
  // as a flag): BATON_CHECKPOINT_DIR when non-empty.
  std::string checkpoint_dir;
  // The GPUs of the rank's assignment in local-rank order (SupervisorOptions::devices):
  // CUDA_VISIBLE_DEVICES when non-empty, over the worker's and the spec's.
  std::vector<std::string> visible_devices;
};

// Whether a variable of the worker's own environment is passed on to ranks. A rank does not
// get the worker's whole environment (its credentials, its configuration, whatever the
// operator's shell exported): only what locates programs and libraries, the locale and
// time zone, temporary directories, and the settings of the accelerator and communication
// libraries:
//   PATH, LD_LIBRARY_PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, TZ, TMPDIR,
//   SSL_CERT_FILE, SSL_CERT_DIR, and every name starting with LC_, CUDA_, NCCL_, NVIDIA_,
//   GLOO_, OMP_, MKL_, KMP_, or TORCH_.
// A job that needs anything else sets it in spec.env.
bool IsInheritedEnvName(const std::string& name);

// Builds a rank's environment, torchrun-compatible:
//   the inherited part of base_env (IsInheritedEnvName), then spec_env (names reserved by
//   baton::IsReservedEnvName, common/spec/job_spec.h, are ignored and reported in `ignored`; the
//   coordinator rejects such specs anyway), then RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//   GROUP_RANK, GROUP_WORLD_SIZE (= number of workers = ceil(world_size / local_world_size)),
//   ROLE_RANK (= RANK), ROLE_WORLD_SIZE (= WORLD_SIZE), ROLE_NAME=default, MASTER_ADDR,
//   MASTER_PORT, TORCHELASTIC_RUN_ID (= job id), TORCHELASTIC_RESTART_COUNT
//   (= max(generation - 1, 0)), TORCHELASTIC_MAX_RESTARTS=0, BATON_JOB_ID, BATON_GENERATION,
//   BATON_METRICS_FD, BATON_CHECKPOINT_DIR (only when checkpoint_dir is non-empty),
//   CUDA_VISIBLE_DEVICES (only when visible_devices is non-empty; a spec's own value is then
//   ignored and reported in `ignored`);
//   OMP_NUM_THREADS=1 unless base_env or spec_env sets it.
// Later entries win; the result has one entry per name, sorted by name.
std::vector<std::string> BuildRankEnv(const RankEnvInput& input,
                                      std::vector<std::string>* ignored = nullptr);

}  // namespace baton::worker
