#include "worker/trainer/checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

absl::Status OsError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("writing", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", dir.string(), ": ", ec.message()));

  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("creating", tmp);
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = OsError("fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = OsError("closing", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    status = OsError("renaming to", path);
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return OsError("opening", dir.string());
  const bool synced = ::fsync(dir_fd) == 0;
  ::close(dir_fd);
  if (!synced) return OsError("fsync", dir.string());
  return absl::OkStatus();
}

absl::Status SaveTensorDict(const NamedTensors& tensors, const std::string& path) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      if (dict.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", name, "'"));
      }
      dict.insert(name, tensor.detach().contiguous());
    }
    bytes = torch::jit::pickle_save(c10::IValue(dict));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serialising ", path, ": ", e.what()));
  }
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()));
}

absl::StatusOr<NamedTensors> LoadTensorDict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  NamedTensors tensors;
  try {
    const c10::IValue value = torch::jit::pickle_load(bytes);
    if (!value.isGenericDict()) {
      return absl::DataLossError(absl::StrCat(path, ": not a pickled dict"));
    }
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        return absl::DataLossError(absl::StrCat(path, ": not a dict of str -> Tensor"));
      }
      tensors.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
    }
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  return tensors;
}

}  // namespace baton::trainer
