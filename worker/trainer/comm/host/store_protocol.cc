#include "worker/trainer/comm/host/store_protocol.h"

#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace baton::trainer {

std::string StoreGetString(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

void StoreSetString(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// A member's outcome is published as "ok" or "!<status code number> <message>".
absl::Status AgreeOn(c10d::Store& store, const std::string& phase, int member, int size,
                     const absl::Status& mine, const std::string& what,
                     const std::vector<int>& ranks) {
  StoreSetString(store, absl::StrCat(phase, "/", member),
                 mine.ok() ? "ok"
                           : absl::StrCat("!", static_cast<int>(mine.code()), " ",
                                          mine.message()));
  for (int i = 0; i < size; ++i) {
    const std::string v = StoreGetString(store, absl::StrCat(phase, "/", i));
    if (v == "ok") continue;
    const size_t space = v.find(' ');
    int code = static_cast<int>(absl::StatusCode::kInternal);
    if (space == std::string::npos || !absl::SimpleAtoi(v.substr(1, space - 1), &code)) {
      return absl::InternalError(absl::StrCat("bad outcome record '", v, "' for ", phase));
    }
    const std::string message = v.substr(space + 1);
    if (what.empty()) return absl::Status(static_cast<absl::StatusCode>(code), message);
    const int rank = ranks.empty() ? i : ranks[i];
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat(what, " (rank ", rank, "): ", message));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
