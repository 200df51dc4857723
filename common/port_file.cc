#include "common/port_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace baton {

absl::Status WritePortFile(const std::string& path, int port) {
  // Per process, so two daemons writing the same path do not share a temporary file.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.flush();
    if (!out.good()) {
      const int err = errno;
      std::remove(tmp.c_str());
      return absl::InternalError(
          absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace baton
