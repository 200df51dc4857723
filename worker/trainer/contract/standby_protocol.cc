#include "worker/trainer/contract/standby_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {
namespace {

constexpr char kMagic[4] = {'B', 'S', 'R', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint32_t);

absl::Status AppendField(absl::string_view s, std::string* out) {
  if (s.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("standby request: NUL byte in '", s, "'"));
  }
  out->append(s.data(), s.size());
  out->push_back('\0');
  return absl::OkStatus();
}

// Reads exactly `size` bytes. Returns the number read before EOF (< size) or an error.
absl::StatusOr<size_t> ReadFull(int fd, char* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buf + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("standby request: read: ", ::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// Splits the payload into its NUL-terminated fields, in order.
class FieldReader {
 public:
  explicit FieldReader(absl::string_view payload) : rest_(payload) {}

  bool Next(std::string* out) {
    const size_t nul = rest_.find('\0');
    if (nul == absl::string_view::npos) return false;
    out->assign(rest_.data(), nul);
    rest_.remove_prefix(nul + 1);
    return true;
  }
  bool NextCount(size_t* count) {
    std::string s;
    return Next(&s) && absl::SimpleAtoi(s, count) && *count <= rest_.size();
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

}  // namespace

absl::StatusOr<std::string> EncodeStandbyRequest(const StandbyRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("standby request: empty argv");
  std::string payload;
  absl::Status s = AppendField(absl::StrCat(request.argv.size()), &payload);
  for (const std::string& a : request.argv) {
    if (s.ok()) s = AppendField(a, &payload);
  }
  if (s.ok()) s = AppendField(absl::StrCat(request.env.size()), &payload);
  for (const std::string& e : request.env) {
    if (s.ok()) s = AppendField(e, &payload);
  }
  if (s.ok()) s = AppendField(request.working_dir, &payload);
  if (!s.ok()) return s;
  if (payload.size() > kMaxStandbyRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("standby request: ", payload.size(), " bytes is over the limit of ",
                     kMaxStandbyRequestBytes));
  }
  std::string out(kMagic, sizeof(kMagic));
  const uint32_t size = static_cast<uint32_t>(payload.size());
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out += payload;
  return out;
}

absl::StatusOr<std::optional<StandbyRequest>> ReadStandbyRequest(int fd) {
  char header[kHeaderBytes];
  absl::StatusOr<size_t> n = ReadFull(fd, header, sizeof(header));
  if (!n.ok()) return n.status();
  if (*n == 0) return std::nullopt;
  if (*n < sizeof(header)) return absl::DataLossError("standby request: truncated header");
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("standby request: bad magic");
  }
  uint32_t size = 0;
  std::memcpy(&size, header + sizeof(kMagic), sizeof(size));
  if (size > kMaxStandbyRequestBytes) {
    return absl::DataLossError(absl::StrCat("standby request: ", size, " bytes is too large"));
  }
  std::string payload(size, '\0');
  n = ReadFull(fd, payload.data(), payload.size());
  if (!n.ok()) return n.status();
  if (*n < payload.size()) return absl::DataLossError("standby request: truncated payload");

  StandbyRequest request;
  FieldReader fields(payload);
  size_t argc = 0, envc = 0;
  bool ok = fields.NextCount(&argc) && argc > 0;
  request.argv.resize(ok ? argc : 0);
  for (std::string& a : request.argv) ok = ok && fields.Next(&a);
  ok = ok && fields.NextCount(&envc);
  request.env.resize(ok ? envc : 0);
  for (std::string& e : request.env) ok = ok && fields.Next(&e);
  ok = ok && fields.Next(&request.working_dir) && fields.done();
  if (!ok) return absl::DataLossError("standby request: malformed payload");
  return request;
}

absl::Status ApplyStandbyRequest(const StandbyRequest& request) {
  const int dev_null = ::open("/dev/null", O_RDONLY);
  if (dev_null < 0 || ::dup2(dev_null, 0) < 0) {
    return absl::InternalError(absl::StrCat("cannot open /dev/null: ", ::strerror(errno)));
  }
  if (dev_null != 0) ::close(dev_null);
  if (!request.working_dir.empty() && ::chdir(request.working_dir.c_str()) != 0) {
    const int err = errno;
    // The cold launcher's wording (posix_process_launcher.cc), so both read alike.
    const std::string message = absl::StrCat("cannot change directory to ",
                                             request.working_dir, ": ", ::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  ::clearenv();
  for (const std::string& entry : request.env) {
    // execve would pass an entry without '='; getenv could not see it.
    if (entry.find('=') == std::string::npos) continue;
    ::putenv(::strdup(entry.c_str()));  // Leaked: the environment points into it.
  }
  return absl::OkStatus();
}

void SignalStandbyLoaded(int fd) {
  const char byte = kStandbyLoaded;
  while (::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
  }
}

}  // namespace baton::trainer
