#include "client/job/job_file.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/job/yaml_proto.h"
#include "common/status_macros.h"
#include "common/yaml/bounded_yaml.h"

namespace baton::cli {
namespace {

using baton::v1::JobSpec;

std::string CurrentDir() {
  char buf[4096];
  if (getcwd(buf, sizeof(buf)) == nullptr) return "/";
  return buf;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Applies one "PATH=VALUE" override to `root` (a mapping).
absl::Status ApplyOverride(const std::string& arg, YAML::Node& root) {
  const YamlSource source{absl::StrCat("--set ", arg), /*has_positions=*/false};
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.name, ": expected PATH=VALUE, e.g. --set workers.min=2"));
  }
  const std::vector<std::string> keys = absl::StrSplit(arg.substr(0, eq), '.');
  for (const std::string& key : keys) {
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source.name, ": '", arg.substr(0, eq), "' is not a field path"));
    }
  }
  YAML::Node value;
  try {
    const std::vector<YAML::Node> docs = LoadAllBounded(arg.substr(eq + 1));
    if (!docs.empty()) value = docs[0];
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.name, ": ", arg.substr(0, eq), ": invalid YAML value: ", e.msg));
  }

  // Check the path and value on their own first, so errors name the --set argument:
  // convert {k1: {k2: ... VALUE}} into a scratch spec.
  YAML::Node probe = value;
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
    YAML::Node wrapper(YAML::NodeType::Map);
    wrapper[*it] = probe;
    probe.reset(wrapper);
  }
  JobSpec scratch;
  RETURN_IF_ERROR(YamlToMessage(probe, source, &scratch));

  // Graft VALUE into the tree, replacing anything in the way (the check above proved every
  // intermediate key names a message or map field).
  YAML::Node cursor = root;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node child = cursor[keys[i]];
    if (!child.IsMap()) {
      cursor[keys[i]] = YAML::Node(YAML::NodeType::Map);
      child.reset(cursor[keys[i]]);
    }
    cursor.reset(child);
  }
  cursor[keys.back()] = value;
  return absl::OkStatus();
}

void ResolveInPlace(const std::string& base_dir, std::string* path) {
  *path = ResolvePath(base_dir, *path);
}

}  // namespace

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (path.empty()) return path;
  std::string joined;
  if (path[0] == '/') {
    joined = path;
  } else {
    std::string base = base_dir.empty() ? CurrentDir() : base_dir;
    if (base[0] != '/') base = absl::StrCat(CurrentDir(), "/", base);
    joined = absl::StrCat(base, "/", path);
  }
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(joined, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

absl::StatusOr<JobSpec> ParseJobYaml(absl::string_view text, const std::string& base_dir,
                                     const std::vector<std::string>& overrides,
                                     const std::string& source_name) {
  const YamlSource source{source_name, /*has_positions=*/true};
  YAML::Node root;
  try {
    std::vector<YAML::Node> docs = LoadAllBounded(std::string(text));
    if (docs.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": holds ", docs.size(), " YAML documents; expected exactly one"));
    }
    if (!docs.empty()) root = docs[0];
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatLocation(source, e.mark), ": invalid YAML: ", e.msg));
  }
  if (!root.IsDefined() || root.IsNull()) {
    if (overrides.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": is empty; expected a mapping with name, trainer or command, "
                       "workers, ..."));
    }
    root = YAML::Node(YAML::NodeType::Map);
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatLocation(source, root.Mark()),
                     ": expected a mapping of JobSpec fields at the top level"));
  }
  for (const std::string& arg : overrides) RETURN_IF_ERROR(ApplyOverride(arg, root));

  JobSpec spec;
  RETURN_IF_ERROR(YamlToMessage(root, source, &spec));

  const std::string base = ResolvePath(CurrentDir(), base_dir.empty() ? "." : base_dir);
  if (spec.has_trainer()) ResolveInPlace(base, spec.mutable_trainer()->mutable_data_dir());
  if (spec.has_command()) ResolveInPlace(base, spec.mutable_command()->mutable_working_dir());
  ResolveInPlace(base, spec.mutable_checkpoint_dir());
  return spec;
}

absl::StatusOr<JobSpec> ParseJobFile(const std::string& path,
                                     const std::vector<std::string>& overrides) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": is a directory"));
  }
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot read ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    return absl::FailedPreconditionError(message);
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
  }
  return ParseJobYaml(text.str(), DirName(path), overrides, path);
}

}  // namespace baton::cli
