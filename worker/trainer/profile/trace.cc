#include "worker/trainer/profile/trace.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::trainer {

void TraceRecorder::Record(TraceSpan span) {
  absl::MutexLock lock(&mu_);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  spans_.push_back(std::move(span));
}

std::vector<TraceSpan> TraceRecorder::Spans() const {
  absl::MutexLock lock(&mu_);
  return spans_;
}

int64_t TraceRecorder::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void TraceRecorder::Clear() {
  absl::MutexLock lock(&mu_);
  spans_.clear();
  dropped_ = 0;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if there is none.
size_t Utf8Length(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

std::string ThreadName(int thread) {
  if (thread == kTrainingTraceThread) return "training";
  if (thread == kCommTraceThread) return "collectives";
  return absl::StrCat("thread ", thread);
}

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
      ++i;
    } else if (const size_t n = Utf8Length(s, i); n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    }
  }
  return out + "\"";
}

std::string ChromeTraceJson(
    const std::vector<std::pair<TraceProcess, std::vector<TraceSpan>>>& processes) {
  std::vector<std::string> events;
  int64_t dropped = 0;
  for (const auto& [process, spans] : processes) {
    dropped += process.dropped_spans;
    const std::string label =
        absl::StrCat("rank ", process.rank, process.host.empty() ? "" : " @ ", process.host);
    events.push_back(absl::StrCat(R"({"name":"process_name","ph":"M","pid":)", process.rank,
                                  R"(,"tid":0,"args":{"name":)", JsonString(label), "}}"));
    events.push_back(absl::StrCat(R"({"name":"process_sort_index","ph":"M","pid":)", process.rank,
                                  R"(,"tid":0,"args":{"sort_index":)", process.rank, "}}"));
    std::set<int> threads;
    for (const TraceSpan& span : spans) threads.insert(span.thread);
    for (int thread : threads) {
      events.push_back(absl::StrCat(R"({"name":"thread_name","ph":"M","pid":)", process.rank,
                                    R"(,"tid":)", thread, R"(,"args":{"name":)",
                                    JsonString(ThreadName(thread)), "}}"));
    }
    for (const TraceSpan& span : spans) {
      std::string args;
      for (const auto& [key, value] : span.int_args) {
        absl::StrAppend(&args, args.empty() ? "" : ",", JsonString(key), ":", value);
      }
      for (const auto& [key, value] : span.string_args) {
        absl::StrAppend(&args, args.empty() ? "" : ",", JsonString(key), ":", JsonString(value));
      }
      events.push_back(absl::StrCat(R"({"name":)", JsonString(span.name), R"(,"cat":)",
                                    JsonString(span.category.empty() ? "trainer" : span.category),
                                    R"(,"ph":"X","ts":)", Micros(span.start), R"(,"dur":)",
                                    std::max<int64_t>(0, absl::ToInt64Microseconds(span.duration)),
                                    R"(,"pid":)", process.rank, R"(,"tid":)", span.thread,
                                    R"(,"args":{)", args, "}}"));
    }
  }
  std::string job = processes.empty() ? "" : processes.front().first.job_id;
  std::string windows;
  for (const auto& [process, spans] : processes) {
    absl::StrAppend(&windows, windows.empty() ? "" : ",", R"({"rank":)", process.rank,
                    R"(,"first_step":)", process.first_step, R"(,"steps":)", process.steps,
                    R"(,"partial":)", process.partial ? "true" : "false", "}");
  }
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, events[i], i + 1 < events.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, R"(],"displayTimeUnit":"ms","otherData":{"job_id":)", JsonString(job),
                  R"(,"dropped_spans":)", dropped, R"(,"windows":[)", windows, "]}}\n");
  return out;
}

}  // namespace baton::trainer
