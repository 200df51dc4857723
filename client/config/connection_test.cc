#include "client/config/connection.h"

#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

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

}  // namespace
}  // namespace baton::cli
