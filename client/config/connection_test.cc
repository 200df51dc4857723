#include "client/config/connection.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/net/testing/fake_replica.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

ConnectionInputs WithConfig(const std::string& yaml) {
  ConnectionInputs in;
  in.config_env = Write("config.yaml", yaml);
  return in;
}

TEST(ConnectionTest, ContextSuppliesAddressCaAndToken) {
  const std::string token = Write("alice.token", "tok-alice\n");
  ConnectionInputs in = WithConfig(
      "current_context: alice\ncontexts:\n  alice:\n    coordinator: c.example:7070\n"
      "    ca: /pki/ca.crt\n    token_file: " + token + "\n  local:\n"
      "    coordinator: 127.0.0.1:7070\n    insecure: true\n");
  absl::StatusOr<Connection> conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_EQ(conn->context, "alice");
  EXPECT_EQ(conn->coordinator, "c.example:7070");
  EXPECT_EQ(conn->ca, "/pki/ca.crt");
  EXPECT_EQ(conn->token, "tok-alice");
  EXPECT_FALSE(conn->insecure);

  in.context_env = "local";
  conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_TRUE(conn->insecure);
  EXPECT_EQ(conn->coordinator, "127.0.0.1:7070");

  // Flags beat the environment, which beats the context.
  in.context_flag = "alice";
  in.coordinator_env = "env.example:1";
  in.token_env = "tok-env";
  conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_EQ(conn->coordinator, "env.example:1");
  EXPECT_EQ(conn->token, "tok-env");
  in.coordinator_flag = "flag.example:2";
  in.ca_flag = "/other/ca.crt";
  conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_EQ(conn->coordinator, "flag.example:2");
  EXPECT_EQ(conn->ca, "/other/ca.crt");
}

TEST(ConnectionTest, ClearErrors) {
  ConnectionInputs in = WithConfig("contexts:\n  a:\n    coordinator: x:1\n    tls: yes\n");
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("contexts.a: unknown field 'tls'")));
  in = WithConfig("contexts:\n  a:\n    coordinator: x:1\n");
  in.context_flag = "b";
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no context 'b'")));
  in.context_flag = "a";
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CA certificate")));
  in.insecure_flag = true;
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("only allowed on loopback")));
  in.coordinator_flag = "127.0.0.1:9";
  EXPECT_OK(ResolveConnection(in, "localhost:7070").status());
}

// yaml-cpp 0.7 never ends a document starting with ',' (allocating until bad_alloc): a
// config file holding one must be an error, not a CLI that eats the memory.
TEST(ConnectionTest, AConfigTheYamlParserCannotEndIsAnError) {
  for (const std::string text : {",", "&a ,", "contexts: {}\n---\n,"}) {
    EXPECT_THAT(ParseCliConfig(text, "config.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.yaml")))
        << text;
  }
}

TEST(ConnectionTest, NoConfigFileAtTheDefaultPlaceIsFine) {
  ConnectionInputs in;
  in.home = ::testing::TempDir() + "/nohome";
  in.insecure_flag = true;
  absl::StatusOr<Connection> conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_EQ(conn->coordinator, "localhost:7070");
  in.config_env = "/nonexistent/config.yaml";  // named explicitly: must exist
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("BATON_CONFIG")));
}

TEST(ConnectionTest, TheCoordinatorMayListSeveralAddresses) {
  ConnectionInputs in = WithConfig(
      "current_context: ha\ncontexts:\n  ha:\n    coordinator: c1.example:7070, c2.example:7070\n"
      "    ca: /pki/ca.crt\n");
  absl::StatusOr<Connection> conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_EQ(conn->coordinator, "c1.example:7070, c2.example:7070");
  EXPECT_THAT(conn->coordinators, ElementsAre("c1.example:7070", "c2.example:7070"));
  in.coordinator_env = "[::1]:7070";
  conn = ResolveConnection(in, "localhost:7070");
  ASSERT_OK(conn.status());
  EXPECT_THAT(conn->coordinators, ElementsAre("[::1]:7070"));

  // A bad list names where it came from, the entry and what is allowed.
  in.coordinator_flag = "c1.example:7070,c1.example:7070";
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--coordinator: coordinator address 'c1.example:7070' "
                                       "is listed twice"),
                             HasSubstr("allowed: HOST:PORT"))));
  in.coordinator_flag = "";
  in.coordinator_env = "c1.example";
  EXPECT_THAT(
      ResolveConnection(in, "localhost:7070").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("BATON_COORDINATOR: coordinator address 'c1.example' has no port")));
  in = WithConfig("current_context: ha\ncontexts:\n  ha:\n    coordinator: c1:7070,,c2:1\n");
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("context 'ha' coordinator: coordinator address list")));

  // Plaintext needs every address on loopback.
  in = ConnectionInputs();
  in.insecure_flag = true;
  in.coordinator_flag = "127.0.0.1:7070,10.0.0.2:7070";
  EXPECT_THAT(ResolveConnection(in, "localhost:7070").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("10.0.0.2:7070")));
  in.coordinator_flag = "127.0.0.1:7070,[::1]:7070";
  EXPECT_OK(ResolveConnection(in, "localhost:7070").status());
}

constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kGetJob[] = "/baton.v1.JobService/GetJob";

// A plaintext connection to `addresses` (a comma-separated list), as ResolveConnection
// returns it.
Connection Plaintext(const std::string& addresses) {
  ConnectionInputs in;
  in.insecure_flag = true;
  in.coordinator_flag = addresses;
  absl::StatusOr<Connection> conn = ResolveConnection(in, "localhost:7070");
  EXPECT_OK(conn.status());
  return conn.ok() ? *conn : Connection();
}

// Sends one GetJob (an empty message) on `channel`; its final status.
grpc::Status GetJob(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, kGetJob, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

TEST(OpenChannelTest, WithSeveralAddressesDialsTheLeader) {
  FakeReplica first, leader, last;
  first.role().BecomeStandby(leader.address());
  last.role().BecomeStandby(leader.address());
  const Connection conn =
      Plaintext(absl::StrCat(first.address(), ",", leader.address(), ",", last.address()));
  absl::StatusOr<CoordinatorChannel> channel = OpenChannel(conn, grpc::ChannelArguments());
  ASSERT_OK(channel.status());
  EXPECT_EQ(channel->address, leader.address());
  // Probed in list order up to the leader; calls then go to it.
  EXPECT_EQ(first.role().calls(kCheck), 1);
  EXPECT_EQ(leader.role().calls(kCheck), 1);
  EXPECT_EQ(last.role().calls(kCheck), 0);
  EXPECT_EQ(GetJob(channel->channel).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(leader.role().calls(kGetJob), 1);
  EXPECT_EQ(first.role().calls(kGetJob), 0);
}

TEST(OpenChannelTest, WhenNoneLeadsTheErrorListsEachAddressesAnswer) {
  FakeReplica standby, gone;
  standby.role().BecomeStandby(std::nullopt);
  gone.Shutdown();
  const Connection conn = Plaintext(absl::StrCat(standby.address(), ",", gone.address()));
  EXPECT_THAT(
      OpenChannel(conn, grpc::ChannelArguments(), absl::Seconds(10)).status(),
      StatusIs(absl::StatusCode::kUnavailable, AllOf(HasSubstr("no coordinator leads"),
                                                     HasSubstr(standby.address() + ": NOT_SERVING"),
                                                     HasSubstr(gone.address() + ": unreachable"))));
}

TEST(OpenChannelTest, OneAddressIsDialedWithoutAProbe) {
  FakeReplica standby;
  standby.role().BecomeStandby(std::nullopt);
  absl::StatusOr<CoordinatorChannel> channel =
      OpenChannel(Plaintext(standby.address()), grpc::ChannelArguments());
  ASSERT_OK(channel.status());
  EXPECT_EQ(channel->address, standby.address());
  EXPECT_EQ(standby.role().calls(kCheck), 0);
  // Its calls get the standby's answer, as they would have before replicas existed.
  EXPECT_EQ(GetJob(channel->channel).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace baton::cli
