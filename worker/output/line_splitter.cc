#include "worker/output/line_splitter.h"

#include <cstdint>

namespace baton::worker {

void LineSplitter::EmitPending(bool truncated, const Emit& emit) {
  Line line;
  line.text.swap(pending_);
  if (!line.text.empty() && line.text.back() == '\r' && !truncated) line.text.pop_back();
  line.truncated = truncated;
  emit(std::move(line));
}

void LineSplitter::Feed(absl::string_view data, const Emit& emit) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const bool complete = nl != absl::string_view::npos;
    const absl::string_view chunk = data.substr(0, nl);  // All of `data` if no newline.
    if (discarding_) {
      if (!complete) return;
      discarding_ = false;
    } else if (chunk.size() > max_line_bytes_ - pending_.size()) {
      pending_.append(chunk.data(), max_line_bytes_ - pending_.size());
      EmitPending(/*truncated=*/true, emit);
      if (!complete) {
        discarding_ = true;
        return;
      }
    } else {
      pending_.append(chunk.data(), chunk.size());
      if (!complete) return;
      EmitPending(/*truncated=*/false, emit);
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Finish(const Emit& emit) {
  if (!pending_.empty()) EmitPending(/*truncated=*/false, emit);
  discarding_ = false;
}

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    }
    bool valid = len != 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    valid = valid && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (valid) {
      out.append(text.data() + i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

}  // namespace baton::worker
