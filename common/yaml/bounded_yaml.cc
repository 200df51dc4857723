#include "common/yaml/bounded_yaml.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>

namespace baton {
namespace {

// Counts a document's parse events and throws a ParserException at the first one past
// `limit`. yaml-cpp 0.7 (Debian 12) loops forever, allocating, on a ',' where a document
// starts ("," or "&a ,": found by //client/job:job_file_fuzz), so `baton submit` died of
// bad_alloc after eating the memory. Every event consumes at least one byte of the text
// except a document's start and end and an implicit null, so honest YAML stays far below
// a limit of a few events per byte.
class EventBound : public YAML::EventHandler {
 public:
  explicit EventBound(size_t limit) : limit_(limit) {}
  void OnDocumentStart(const YAML::Mark& mark) override { Count(mark); }
  void OnDocumentEnd() override { Count(last_); }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnSequenceEnd() override { Count(last_); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnMapEnd() override { Count(last_); }

 private:
  void Count(const YAML::Mark& mark) {
    last_ = mark;
    if (++events_ > limit_) throw YAML::ParserException(mark, "YAML the parser cannot end");
  }

  const size_t limit_;
  size_t events_ = 0;
  YAML::Mark last_ = YAML::Mark::null_mark();
};

}  // namespace

std::vector<YAML::Node> LoadAllBounded(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  EventBound bound(4 * text.size() + 16);
  while (parser.HandleNextDocument(bound)) {
  }
  return YAML::LoadAll(text);
}

YAML::Node LoadBounded(const std::string& text) {
  std::vector<YAML::Node> docs = LoadAllBounded(text);
  return docs.empty() ? YAML::Node() : docs.front();
}

}  // namespace baton
