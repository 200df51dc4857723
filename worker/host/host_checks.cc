#include "worker/host/host_checks.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {
namespace {

baton::v1::HostCheck Result(const std::string& name, bool ok, std::string detail) {
  baton::v1::HostCheck c;
  c.set_name(name);
  c.set_ok(ok);
  c.set_detail(std::move(detail));
  return c;
}

std::string Mib(int64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

}  // namespace

baton::v1::HostCheck CheckSharedMemory(const std::string& dir, int64_t bytes) {
  static std::atomic<int> counter{0};
  const std::string path =
      absl::StrCat(dir, "/baton-preflight-", ::getpid(), "-", counter.fetch_add(1));
  const auto failed = [&](const std::string& what, int err) {
    return Result("shm", false, absl::StrCat(what, " ", path, ": ", std::strerror(err)));
  };
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return failed("cannot create", errno);
  ::unlink(path.c_str());  // Gone whatever happens next.
  if (const int err = ::posix_fallocate(fd.get(), 0, bytes); err != 0) {
    struct statvfs fs = {};
    std::string space;
    if (::statvfs(dir.c_str(), &fs) == 0) {
      space = absl::StrCat(" (", Mib(static_cast<int64_t>(fs.f_bavail) * fs.f_frsize), " free of ",
                           Mib(static_cast<int64_t>(fs.f_blocks) * fs.f_frsize), ")");
    }
    return Result(
        "shm", false,
        absl::StrCat("cannot reserve ", Mib(bytes), " in ", dir, space, ": ", std::strerror(err)));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return failed("cannot map", errno);
  auto* words = static_cast<uint64_t*>(map);
  const size_t n = static_cast<size_t>(bytes) / sizeof(uint64_t);
  for (size_t i = 0; i < n; ++i) words[i] = i * 0x9E3779B97F4A7C15ULL;
  size_t bad = n;
  for (size_t i = 0; i < n && bad == n; ++i) {
    if (words[i] != i * 0x9E3779B97F4A7C15ULL) bad = i;
  }
  ::munmap(map, bytes);
  if (bad != n) {
    return Result("shm", false,
                  absl::StrCat("read back a different value at byte ", bad * sizeof(uint64_t),
                               " of ", Mib(bytes), " written in ", dir));
  }
  struct statvfs fs = {};
  std::string space;
  if (::statvfs(dir.c_str(), &fs) == 0) {
    space = absl::StrCat("; ", Mib(static_cast<int64_t>(fs.f_bavail) * fs.f_frsize), " free");
  }
  return Result("shm", true, absl::StrCat(Mib(bytes), " written and read back in ", dir, space));
}

NvmlView QueryNvml() {
  NvmlView view;
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return view;
  // The few entry points used, by their documented C signatures (nvml.h).
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  using HandleFn = int (*)(unsigned int, void**);
  using ErrorFn = const char* (*)(int);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto error = reinterpret_cast<ErrorFn>(::dlsym(lib, "nvmlErrorString"));
  if (init != nullptr && shutdown != nullptr && count != nullptr && handle != nullptr &&
      init() == 0) {
    view.present = true;
    unsigned int n = 0;
    if (const int rc = count(&n); rc != 0) {
      view.errors.push_back(absl::StrCat("device count: ", error ? error(rc) : "error"));
    }
    view.device_count = static_cast<int>(n);
    for (unsigned int i = 0; i < n; ++i) {
      void* h = nullptr;
      if (const int rc = handle(i, &h); rc != 0) {
        view.errors.push_back(absl::StrCat("GPU ", i, ": ", error ? error(rc) : "error"));
      }
    }
    shutdown();
  }
  ::dlclose(lib);
  return view;
}

baton::v1::HostCheck CheckGpus(int registered, const std::vector<baton::v1::Gpu>& detected,
                               const NvmlView& nvml) {
  std::vector<std::string> problems;
  if (static_cast<int>(detected.size()) < registered) {
    problems.push_back(absl::StrCat("the driver lists ", detected.size(), " GPU(s), the worker ",
                                    "registered ", registered));
  }
  if (nvml.present && nvml.device_count < registered) {
    problems.push_back(absl::StrCat("NVML sees ", nvml.device_count, " GPU(s) of ", registered));
  }
  for (const std::string& e : nvml.errors) problems.push_back(absl::StrCat("NVML: ", e));
  if (!problems.empty()) return Result("gpu", false, absl::StrJoin(problems, "; "));
  return Result("gpu", true,
                absl::StrCat(registered, " GPU(s) present",
                             nvml.present ? " and opened by NVML" : " (no NVML on this host)"));
}

}  // namespace baton::worker
