#include "worker/trainer/checkpoint/pickle_scan.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/testing/python_runner.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

// Python's own pickles of one object that uses most opcodes, at protocols 0 to 5: the scan
// accepts every one (it must never refuse what a pickler writes).
TEST(PickleScanTest, AcceptsWhatPythonsPicklerWritesAtEveryProtocol) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  absl::StatusOr<std::string> out = testing::RunPython3(R"py(
import pickle, collections
shared = ['shared']
obj = {'ints': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**63, -2**100, 10**40],
       'floats': [0.5, -1e300, float('inf')], 'text': ['', 'a', 'é' * 300, 'x' * 70000],
       'bytes': [b'', b'\x00' * 300, bytearray(b'ab')], 'none': None, 'bools': (True, False),
       'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], 'sets': [{1, 2}, frozenset({3})],
       'refs': [shared, shared], 'ordered': collections.OrderedDict(a=1), 'nested': [[[[]]]]}
for protocol in range(6):
    print(pickle.dumps(obj, protocol=protocol).hex())
)py",
                                                         dir);
  ASSERT_OK(out);
  const std::vector<std::string> lines = absl::StrSplit(*out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  for (size_t protocol = 0; protocol < lines.size(); ++protocol) {
    SCOPED_TRACE(protocol);
    EXPECT_OK(CheckPickleBounds(absl::HexStringToBytes(lines[protocol])));
  }
}

// What the unpickler would have allocated before noticing the stream is short, and streams
// that are not pickles at all.
TEST(PickleScanTest, RefusesLengthsAndMemoIndicesBeyondTheStream) {
  const struct {
    std::string pickle;
    std::string error;
  } cases[] = {
      // BINUNICODE claiming 0x7e000007 bytes (checkpoint_contents_fuzz's find).
      {std::string("\x80\x02X\x07\x00\x00\x7e", 7) + "abc.", "claims 2113929223 bytes, 4 are left"},
      {std::string("\x80\x02\x8e\xff\xff\xff\xff\xff\xff\xff\xff.", 12), "claims"},  // BINBYTES8
      {std::string("\x80\x02]r\xff\xff\xff\xff.", 9), "memo index"},                  // LONG_BINPUT
      {"(lp99999999\n.", "memo index"},                                                // PUT
      {"(lpx\n.", "memo index"},
      {std::string("\x80\x02J\x01\x02", 5), "runs past the end"},  // BININT, 2 of 4 bytes
      {"cos\nsystem", "has no end"},                                 // GLOBAL's second line
      {"\xff.", "not a pickle opcode"},
      {"N", "ends without STOP"},
      {"N.N", "bytes after STOP"},
      {"", "ends without STOP"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(absl::BytesToHexString(c.pickle));
    EXPECT_THAT(CheckPickleBounds(c.pickle),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr(c.error)));
  }
  EXPECT_OK(CheckPickleBounds(std::string("\x80\x02X\x03\x00\x00\x00" "abc.", 11)));
}

}  // namespace
}  // namespace baton::trainer
