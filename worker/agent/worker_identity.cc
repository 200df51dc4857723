#include "worker/agent/worker_identity.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::worker {

absl::StatusOr<std::string> LoadOrCreateWorkerId(const std::string& work_dir) {
  const std::string path = absl::StrCat(work_dir, "/worker_id");
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::string id(absl::StripAsciiWhitespace(ss.str()));
      if (!id.empty()) return id;
    }
  }
  absl::BitGen gen;
  const std::string id = absl::StrFormat("w-%016x", absl::Uniform<uint64_t>(gen));
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << id << "\n";
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("rename to ", path, ": ", std::strerror(err)));
  }
  return id;
}

}  // namespace baton::worker
