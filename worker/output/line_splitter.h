#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace baton::worker {

// Splits a byte stream (a child's stdout, stderr or metrics pipe) into lines, holding at most
// `max_line_bytes` bytes of an unfinished line so a misbehaving program cannot exhaust memory.
// A line longer than that is emitted once, cut to `max_line_bytes` with `truncated` set, and
// the rest of it (up to the next '\n') is discarded. "\n" and a preceding "\r" are stripped.
// Not thread-safe: owned by the thread reading the stream.
class LineSplitter {
 public:
  struct Line {
    std::string text;
    bool truncated = false;
  };
  using Emit = std::function<void(Line line)>;

  explicit LineSplitter(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Consumes `data`, calling `emit` for every line completed (or cut) by it.
  void Feed(absl::string_view data, const Emit& emit);
  // End of stream: emits the unfinished last line, if any.
  void Finish(const Emit& emit);

 private:
  void EmitPending(bool truncated, const Emit& emit);

  const size_t max_line_bytes_;
  std::string pending_;
  bool discarding_ = false;  // Inside the tail of a cut line.
};

// Returns `text` with every invalid UTF-8 sequence replaced by U+FFFD, so it can travel in a
// proto3 string field (which the peer would otherwise fail to parse).
std::string SanitizeUtf8(absl::string_view text);

}  // namespace baton::worker
