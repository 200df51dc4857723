#include "common/port_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace baton {
namespace {

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(WritePortFileTest, WritesThePortAndReplacesAnOldFileLeavingNoTemporary) {
  const std::filesystem::path dir = std::filesystem::path(TestDir()) / "port_file_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "port").string();

  ASSERT_OK(WritePortFile(path, 7070));
  EXPECT_EQ(Read(path), "7070\n");
  ASSERT_OK(WritePortFile(path, 41234));
  EXPECT_EQ(Read(path), "41234\n");

  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "port");
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(WritePortFileTest, MissingDirectoryIsAnError) {
  EXPECT_THAT(WritePortFile(TestDir() + "/no/such/dir/port", 1),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("no/such/dir")));
}

}  // namespace
}  // namespace baton
