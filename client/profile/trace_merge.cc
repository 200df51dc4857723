#include "client/profile/trace_merge.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace baton::cli {
namespace {

// Nesting deeper than this is refused (a trace has 4 levels), so hostile input cannot
// exhaust the stack.
constexpr int kMaxDepth = 64;

// A minimal JSON scanner over raw text: it checks the syntax and finds the extent of each
// value without converting it, so members and elements can be copied verbatim.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : s_(text) {}

  size_t pos() const { return i_; }
  void SkipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool AtEnd() {
    SkipSpace();
    return i_ == s_.size();
  }
  bool Consume(char c) {
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  char Peek() {
    SkipSpace();
    return i_ < s_.size() ? s_[i_] : '\0';
  }

  // The raw text of the next value (string, number, literal, object or array).
  absl::StatusOr<absl::string_view> Value(int depth = 0) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    const size_t start = i_;
    if (i_ >= s_.size()) return Error("unexpected end");
    const char c = s_[i_];
    if (c == '"') {
      if (absl::Status st = String(); !st.ok()) return st;
    } else if (c == '{') {
      ++i_;
      if (!Consume('}')) {
        do {
          if (Peek() != '"') return Error("expected a member name");
          if (absl::Status st = String(); !st.ok()) return st;
          if (!Consume(':')) return Error("expected ':'");
          if (absl::StatusOr<absl::string_view> v = Value(depth + 1); !v.ok()) return v;
        } while (Consume(','));
        if (!Consume('}')) return Error("expected ',' or '}'");
      }
    } else if (c == '[') {
      ++i_;
      if (!Consume(']')) {
        do {
          if (absl::StatusOr<absl::string_view> v = Value(depth + 1); !v.ok()) return v;
        } while (Consume(','));
        if (!Consume(']')) return Error("expected ',' or ']'");
      }
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                                s_[i_] == '+' || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
      }
    } else {
      bool matched = false;
      for (absl::string_view literal : {"true", "false", "null"}) {
        if (s_.substr(i_, literal.size()) == literal) {
          i_ += literal.size();
          matched = true;
          break;
        }
      }
      if (!matched) return Error("unexpected character");
    }
    return s_.substr(start, i_ - start);
  }

 private:
  absl::Status String() {
    ++i_;  // The opening quote.
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return Error("control character in a string");
      i_ += s_[i_] == '\\' ? 2 : 1;
    }
    if (i_ >= s_.size()) return Error("unterminated string");
    ++i_;
    return absl::OkStatus();
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(what, " at byte ", i_));
  }

  absl::string_view s_;
  size_t i_ = 0;
};

// The members of the object `text`, as (raw quoted name, raw value).
absl::StatusOr<std::vector<std::pair<absl::string_view, absl::string_view>>> Members(
    absl::string_view text) {
  Scanner sc(text);
  std::vector<std::pair<absl::string_view, absl::string_view>> out;
  if (!sc.Consume('{')) return absl::InvalidArgumentError("not a JSON object");
  if (!sc.Consume('}')) {
    do {
      if (sc.Peek() != '"') return absl::InvalidArgumentError("expected a member name");
      absl::StatusOr<absl::string_view> name = sc.Value();
      if (!name.ok()) return name.status();
      if (!sc.Consume(':')) {
        return absl::InvalidArgumentError(absl::StrCat("expected ':' at byte ", sc.pos()));
      }
      absl::StatusOr<absl::string_view> value = sc.Value(1);
      if (!value.ok()) return value.status();
      out.emplace_back(*name, *value);
    } while (sc.Consume(','));
    if (!sc.Consume('}')) {
      return absl::InvalidArgumentError(absl::StrCat("expected ',' or '}' at byte ", sc.pos()));
    }
  }
  if (!sc.AtEnd()) {
    return absl::InvalidArgumentError(absl::StrCat("trailing text at byte ", sc.pos()));
  }
  return out;
}

// The elements of the array `text` (already scanned, so valid).
std::vector<absl::string_view> Elements(absl::string_view text) {
  Scanner sc(text);
  std::vector<absl::string_view> out;
  if (!sc.Consume('[') || sc.Consume(']')) return out;
  do {
    absl::StatusOr<absl::string_view> v = sc.Value(1);
    if (!v.ok()) break;
    out.push_back(*v);
  } while (sc.Consume(','));
  return out;
}

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<std::string> MergeChromeTraces(const std::vector<RankTraceJson>& traces,
                                              const std::string& job_id, int64_t generation) {
  std::vector<const RankTraceJson*> ordered;
  for (const RankTraceJson& t : traces) ordered.push_back(&t);
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const RankTraceJson* a, const RankTraceJson* b) { return a->rank < b->rank; });
  std::vector<std::string> events;
  std::vector<absl::string_view> windows;
  std::vector<int32_t> ranks;
  for (const RankTraceJson* t : ordered) {
    auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("the trace of rank ", t->rank, " is not a Chrome trace: ", why));
    };
    absl::StatusOr<std::vector<std::pair<absl::string_view, absl::string_view>>> members =
        Members(t->json);
    if (!members.ok()) return fail(members.status().message());
    const absl::string_view* trace_events = nullptr;
    for (const auto& [name, value] : *members) {
      if (name == "\"traceEvents\"") trace_events = &value;
      if (name == "\"otherData\"" && !value.empty() && value.front() == '{') {
        absl::StatusOr<std::vector<std::pair<absl::string_view, absl::string_view>>> other =
            Members(value);
        if (!other.ok()) continue;
        for (const auto& [key, v] : *other) {
          if (key == "\"windows\"" && !v.empty() && v.front() == '[') {
            for (absl::string_view w : Elements(v)) windows.push_back(w);
          }
        }
      }
    }
    if (trace_events == nullptr || trace_events->empty() || trace_events->front() != '[') {
      return fail("no \"traceEvents\" list");
    }
    const std::vector<absl::string_view> elements = Elements(*trace_events);
    const bool named = std::any_of(elements.begin(), elements.end(), [](absl::string_view e) {
      return e.find("\"process_name\"") != absl::string_view::npos;
    });
    if (!named) {
      events.push_back(absl::StrCat(R"({"name":"process_name","ph":"M","pid":)", t->rank,
                                    R"(,"tid":0,"args":{"name":"rank )", t->rank, "\"}}"));
    }
    for (absl::string_view e : elements) events.emplace_back(e);
    ranks.push_back(t->rank);
  }
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, events[i], i + 1 < events.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, R"(],"displayTimeUnit":"ms","otherData":{"job_id":)", JsonQuote(job_id),
                  R"(,"generation":)", generation, R"(,"ranks":[)", absl::StrJoin(ranks, ","),
                  R"(],"windows":[)", absl::StrJoin(windows, ","), "]}}\n");
  return out;
}

}  // namespace baton::cli
