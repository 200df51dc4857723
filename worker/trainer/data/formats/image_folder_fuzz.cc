// Fuzz target: listing an image-folder data set (ScanImageFolder), whose tree a tenant makes
// (names, nesting, symlinks, hidden entries). The input describes a tree, one entry a line,
// built in a scratch directory before the scan:
//   d NAME          a directory          f NAME   an empty file
//   l NAME TARGET   a symlink to TARGET (relative, inside the tree)
// NAMEs are relative paths inside the tree (no "..", no leading '/'); at most 64 entries.
// Invariants: no crash and no exception; an error is NOT_FOUND or FAILED_PRECONDITION
// naming a directory of the tree; an index has sorted, unique, non-hidden classes, each
// with at least one sample, every sample an image file of its class's directory, in
// (class, path) order.

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "tools/fuzz/scratch_file.h"
#include "worker/trainer/data/formats/image_folder.h"

namespace {

// A relative path that stays inside the tree.
bool Inside(absl::string_view name) {
  if (name.empty() || name[0] == '/' || name.size() > 200) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") return false;
  }
  return true;
}

bool IsImageName(absl::string_view path) {
  const size_t dot = path.rfind('.');
  if (dot == absl::string_view::npos) return false;
  const std::string ext = absl::AsciiStrToLower(path.substr(dot));
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string root = baton::fuzz::EmptyScratchSubdir("tree");
  int entries = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(reinterpret_cast<const char*>(data), size), '\n')) {
    if (++entries > 64) break;
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 2 || !Inside(f[1]) || absl::StrContains(f[1], absl::string_view("\0", 1))) {
      continue;
    }
    const std::string path = root + "/" + std::string(f[1]);
    if (f[0] == "d") {
      ::mkdir(path.c_str(), 0700);
    } else if (f[0] == "f") {
      std::ofstream(path).put('x');
    } else if (f[0] == "l" && f.size() == 3 && Inside(f[2]) &&
               !absl::StrContains(f[2], absl::string_view("\0", 1))) {
      (void)!::symlink(std::string(f[2]).c_str(), path.c_str());
    }
  }
  const auto index = baton::trainer::ScanImageFolder(root);
  if (!index.ok()) {
    FUZZ_CHECK(index.status().code() == absl::StatusCode::kNotFound ||
               index.status().code() == absl::StatusCode::kFailedPrecondition);
    FUZZ_CHECK(absl::StartsWith(index.status().message(), root));
    return 0;
  }
  const auto& classes = index->classes;
  FUZZ_CHECK(!classes.empty());
  for (size_t i = 0; i < classes.size(); ++i) {
    FUZZ_CHECK(!classes[i].empty() && classes[i][0] != '.');
    if (i > 0) FUZZ_CHECK(classes[i - 1] < classes[i]);
  }
  std::vector<int> per_class(classes.size(), 0);
  for (size_t i = 0; i < index->samples.size(); ++i) {
    const auto& s = index->samples[i];
    FUZZ_CHECK(s.label >= 0 && static_cast<size_t>(s.label) < classes.size());
    FUZZ_CHECK(absl::StartsWith(s.path, root + "/" + classes[s.label] + "/"));
    FUZZ_CHECK(IsImageName(s.path));
    if (i > 0) {
      const auto& prev = index->samples[i - 1];
      FUZZ_CHECK(prev.label < s.label || (prev.label == s.label && prev.path < s.path));
    }
    ++per_class[s.label];
  }
  for (int n : per_class) FUZZ_CHECK(n > 0);
  return 0;
}
