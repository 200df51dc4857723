#include "worker/output/line_splitter.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::ElementsAre;

struct Collected {
  std::vector<std::string> texts;
  std::vector<bool> truncated;
  LineSplitter::Emit emit() {
    return [this](LineSplitter::Line l) {
      texts.push_back(l.text);
      truncated.push_back(l.truncated);
    };
  }
};

TEST(LineSplitterTest, SplitsAcrossFeedsAndStripsCrLf) {
  LineSplitter s(100);
  Collected c;
  s.Feed("a\nbb", c.emit());
  s.Feed("b\r\n\nc", c.emit());
  EXPECT_THAT(c.texts, ElementsAre("a", "bbb", ""));
  s.Finish(c.emit());
  EXPECT_THAT(c.texts, ElementsAre("a", "bbb", "", "c"));
  s.Finish(c.emit());  // Nothing pending: nothing emitted.
  EXPECT_EQ(c.texts.size(), 4u);
}

TEST(LineSplitterTest, CutsLongLinesAndDiscardsTheirTail) {
  LineSplitter s(4);
  Collected c;
  s.Feed("abcd\nabcdef", c.emit());
  s.Feed("ghij", c.emit());
  s.Feed("kl\nxy\n", c.emit());
  EXPECT_THAT(c.texts, ElementsAre("abcd", "abcd", "xy"));
  EXPECT_THAT(c.truncated, ElementsAre(false, true, false));
}

TEST(LineSplitterTest, CutWithinOneFeedContinuesAfterNewline) {
  LineSplitter s(3);
  Collected c;
  s.Feed("123456789\nok\n", c.emit());
  EXPECT_THAT(c.texts, ElementsAre("123", "ok"));
  EXPECT_THAT(c.truncated, ElementsAre(true, false));
}

TEST(LineSplitterTest, MemoryIsBounded) {
  LineSplitter s(8);
  Collected c;
  const std::string chunk(1 << 16, 'x');
  for (int i = 0; i < 64; ++i) s.Feed(chunk, c.emit());  // 4 MiB without a newline.
  s.Feed("\nend\n", c.emit());
  EXPECT_THAT(c.texts, ElementsAre("xxxxxxxx", "end"));
}

TEST(SanitizeUtf8Test, KeepsValidAndReplacesInvalid) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(SanitizeUtf8("\xC3"), "\xEF\xBF\xBD");                                  // Cut sequence.
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // Overlong.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // Surrogate.
}

}  // namespace
}  // namespace baton::worker
