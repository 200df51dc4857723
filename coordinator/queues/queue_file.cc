#include "coordinator/queues/queue_file.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/yaml/bounded_yaml.h"

namespace baton::coordinator {
namespace {

constexpr int kMaxQueues = 1000;
constexpr int kMaxClasses = 100;
constexpr int kMaxUsers = 1000;
constexpr int64_t kMaxQuota = 1000000000;
constexpr int kMaxPriority = 1000000000;
constexpr size_t kMaxFileBytes = 1 << 20;

// Error context: the file's name and the node's position.
class Errors {
 public:
  explicit Errors(std::string name) : name_(std::move(name)) {}
  absl::Status At(const YAML::Node& node, const std::string& field, const std::string& what) const {
    const YAML::Mark m = node.Mark();
    return absl::InvalidArgumentError(
        m.is_null()
            ? absl::StrCat(name_, ": ", field, ": ", what)
            : absl::StrCat(name_, ":", m.line + 1, ":", m.column + 1, ": ", field, ": ", what));
  }

 private:
  std::string name_;
};

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

constexpr char kNameRule[] = "1-63 characters of [a-z0-9-], starting with a letter";

absl::Status KnownKeys(const Errors& e, const YAML::Node& map, const std::string& field,
                       const std::set<std::string>& allowed) {
  if (!map.IsMap()) return e.At(map, field, "must be a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      return e.At(kv.first, field.empty() ? key : absl::StrCat(field, ".", key),
                  absl::StrCat("unknown key; allowed: ",
                               absl::StrJoin(allowed.begin(), allowed.end(), ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Name(const Errors& e, const YAML::Node& node,
                                 const std::string& field) {
  if (!node || !node.IsScalar()) return e.At(node, field, "required, a name");
  const std::string s = node.as<std::string>();
  if (!ValidName(s)) return e.At(node, field, absl::StrCat("'", s, "' is invalid; ", kNameRule));
  return s;
}

absl::StatusOr<int64_t> Integer(const Errors& e, const YAML::Node& node, const std::string& field,
                                int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.as<std::string>(), &v) || v < lo || v > hi) {
    return e.At(node, field,
                absl::StrCat("'", node.IsScalar() ? node.as<std::string>() : "(not a number)",
                             "' is invalid; a whole number in ", lo, "..", hi));
  }
  return v;
}

}  // namespace

absl::StatusOr<QueueSet> ParseQueueFile(const std::string& text, const std::string& name) {
  const Errors e(name);
  YAML::Node root;
  try {
    root = LoadBounded(text);
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", ex.mark.line + 1, ":", ex.mark.column + 1, ": not YAML: ", ex.msg));
  }
  QueueSet set;
  try {
    if (!root || root.IsNull()) return e.At(root, "queues", "required: the file is empty");
    if (absl::Status s = KnownKeys(e, root, "", {"queues", "default_queue", "priority_classes"});
        !s.ok()) {
      return s;
    }
    const YAML::Node classes = root["priority_classes"];
    if (classes) {
      if (!classes.IsSequence() || classes.size() > kMaxClasses) {
        return e.At(classes, "priority_classes",
                    absl::StrCat("must be a list of at most ", kMaxClasses, " classes"));
      }
      std::set<int> values;
      for (size_t i = 0; i < classes.size(); ++i) {
        const std::string field = absl::StrCat("priority_classes[", i, "]");
        const YAML::Node c = classes[i];
        if (absl::Status s = KnownKeys(e, c, field, {"name", "value"}); !s.ok()) return s;
        absl::StatusOr<std::string> n = Name(e, c["name"], field + ".name");
        if (!n.ok()) return n.status();
        if (!c["value"]) return e.At(c, field + ".value", "required, an integer");
        absl::StatusOr<int64_t> v =
            Integer(e, c["value"], field + ".value", -kMaxPriority, kMaxPriority);
        if (!v.ok()) return v.status();
        if (set.priority_classes.count(*n) > 0) {
          return e.At(c["name"], field + ".name", absl::StrCat("'", *n, "' is defined twice"));
        }
        if (!values.insert(static_cast<int>(*v)).second) {
          return e.At(c["value"], field + ".value",
                      absl::StrCat(*v, " is another class's value; values must be unique"));
        }
        set.priority_classes[*n] = static_cast<int>(*v);
      }
    }
    const YAML::Node queues = root["queues"];
    if (!queues || !queues.IsSequence() || queues.size() == 0 || queues.size() > kMaxQueues) {
      return e.At(queues ? queues : root, "queues",
                  absl::StrCat("required: a list of 1..", kMaxQueues, " queues"));
    }
    for (size_t i = 0; i < queues.size(); ++i) {
      const std::string field = absl::StrCat("queues[", i, "]");
      const YAML::Node q = queues[i];
      if (absl::Status s =
              KnownKeys(e, q, field, {"name", "cohort", "quota", "users", "max_priority"});
          !s.ok()) {
        return s;
      }
      QueueConfig config;
      absl::StatusOr<std::string> n = Name(e, q["name"], field + ".name");
      if (!n.ok()) return n.status();
      config.name = *n;
      if (set.users.count(config.name) > 0) {
        return e.At(q["name"], field + ".name",
                    absl::StrCat("'", config.name, "' is defined twice"));
      }
      if (q["cohort"]) {
        absl::StatusOr<std::string> c = Name(e, q["cohort"], field + ".cohort");
        if (!c.ok()) return c.status();
        config.cohort = *c;
      }
      const YAML::Node quota = q["quota"];
      if (!quota) return e.At(q, field + ".quota", "required: {slots: N, gpus: M}");
      if (absl::Status s = KnownKeys(e, quota, field + ".quota", {"slots", "gpus"}); !s.ok()) {
        return s;
      }
      if (!quota["slots"]) return e.At(quota, field + ".quota.slots", "required, a whole number");
      absl::StatusOr<int64_t> slots =
          Integer(e, quota["slots"], field + ".quota.slots", 0, kMaxQuota);
      if (!slots.ok()) return slots.status();
      config.nominal.slots = *slots;
      if (quota["gpus"]) {
        absl::StatusOr<int64_t> gpus =
            Integer(e, quota["gpus"], field + ".quota.gpus", 0, kMaxQuota);
        if (!gpus.ok()) return gpus.status();
        config.nominal.gpus = *gpus;
      }
      const YAML::Node users = q["users"];
      if (!users || !users.IsSequence() || users.size() == 0 || users.size() > kMaxUsers) {
        return e.At(users ? users : q, field + ".users",
                    absl::StrCat("required: a list of 1..", kMaxUsers,
                                 " user names (the token file's), or [\"*\"] for everyone"));
      }
      std::vector<std::string>& allowed = set.users[config.name];
      for (size_t u = 0; u < users.size(); ++u) {
        if (!users[u].IsScalar() || users[u].as<std::string>().empty()) {
          return e.At(users[u], absl::StrCat(field, ".users[", u, "]"), "must be a user name");
        }
        allowed.push_back(users[u].as<std::string>());
      }
      if (const YAML::Node max = q["max_priority"]; max) {
        const std::string m = max.IsScalar() ? max.as<std::string>() : "";
        absl::StatusOr<int> value = ResolvePriority(set, m);
        if (!value.ok() || m.empty()) {
          std::vector<std::string> names;
          for (const auto& [n, v] : set.priority_classes) names.push_back(n);
          return e.At(max, field + ".max_priority",
                      absl::StrCat("'", m, "' is invalid; a priority class (",
                                   names.empty() ? "none defined" : absl::StrJoin(names, ", "),
                                   ") or an integer in ", -kMaxPriority, "..", kMaxPriority));
        }
        set.max_priority[config.name] = *value;
      }
      set.queues.push_back(std::move(config));
    }
    if (root["default_queue"]) {
      absl::StatusOr<std::string> d = Name(e, root["default_queue"], "default_queue");
      if (!d.ok()) return d.status();
      if (set.users.count(*d) == 0) {
        return e.At(root["default_queue"], "default_queue",
                    absl::StrCat("'", *d, "' is not one of the queues"));
      }
      set.default_queue = *d;
    }
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", ex.mark.line + 1, ":", ex.mark.column + 1, ": ", ex.msg));
  }
  return set;
}

absl::StatusOr<QueueSet> ReadQueueFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read the queue file ", path));
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the queue file ", path, " is larger than 1 MiB"));
  }
  return ParseQueueFile(text, path);
}

absl::StatusOr<std::string> QueueFor(const QueueSet& set, const std::string& requested,
                                     const std::string& user) {
  std::string queue = requested;
  if (queue.empty()) {
    if (set.default_queue.empty()) {
      return absl::InvalidArgumentError(
          "queue: required (this cluster has no default queue); `baton queues` lists them");
    }
    queue = set.default_queue;
  }
  auto it = set.users.find(queue);
  if (it == set.users.end()) {
    std::vector<std::string> names;
    for (const QueueConfig& q : set.queues) names.push_back(q.name);
    return absl::NotFoundError(absl::StrCat("queue: '", queue, "' is not a queue; the queues are ",
                                            absl::StrJoin(names, ", ")));
  }
  for (const std::string& u : it->second) {
    if (u == "*" || u == user) return queue;
  }
  return absl::PermissionDeniedError(
      absl::StrCat("queue: user '", user, "' may not submit to queue ", queue));
}

absl::StatusOr<int> ResolvePriority(const QueueSet& set, const std::string& priority) {
  if (priority.empty()) return 0;
  auto it = set.priority_classes.find(priority);
  if (it != set.priority_classes.end()) return it->second;
  int v = 0;
  if (absl::SimpleAtoi(priority, &v) && v >= -kMaxPriority && v <= kMaxPriority) return v;
  std::vector<std::string> names;
  for (const auto& [n, value] : set.priority_classes) names.push_back(n);
  return absl::InvalidArgumentError(
      absl::StrCat("priority: '", priority, "' is neither a class (",
                   names.empty() ? "none defined" : absl::StrJoin(names, ", "),
                   ") nor an integer in -1000000000..1000000000"));
}

absl::StatusOr<int> PriorityIn(const QueueSet& set, const std::string& queue,
                               const std::string& priority) {
  ASSIGN_OR_RETURN(const int value, ResolvePriority(set, priority));
  auto max = set.max_priority.find(queue);
  if (max != set.max_priority.end() && value > max->second) {
    return absl::PermissionDeniedError(absl::StrCat("priority: ", value, " is above queue ", queue,
                                                    "'s max_priority (", max->second,
                                                    "); the queue file sets it"));
  }
  return value;
}

}  // namespace baton::coordinator
