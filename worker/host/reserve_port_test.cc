#include "worker/host/reserve_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

TEST(ReservePortTest, ReturnsAPortThatCanBeBound) {
  absl::StatusOr<int> port = ReserveTcpPort();
  ASSERT_OK(port);
  ASSERT_GT(*port, 0);
  ASSERT_LT(*port, 65536);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

}  // namespace
}  // namespace baton::worker
