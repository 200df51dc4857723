#include <fstream>
#include <map>
#include <string>

#include "common/testing/status_matchers.h"
#include "coordinator/auth/access_policy.h"
#include "coordinator/auth/authenticator.h"
#include "coordinator/auth/peer_identity.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(AuthenticatorTest, HashMatchesOpensslDgst) {
  // printf %s abc | openssl dgst -sha256 -r
  EXPECT_EQ(Authenticator::HashToken("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthenticatorTest, MapsTokensToPrincipalsAndReloads) {
  const std::string path = WriteFile(
      "tokens", absl::StrCat("# users\n\n", Authenticator::HashToken("t-alice"),
                             " alice submitter\n", Authenticator::HashToken("t-root"),
                             "\troot\tadmin\n"));
  auto auth_or = Authenticator::FromTokenFile(path);
  ASSERT_OK(auth_or.status());
  std::unique_ptr<Authenticator> auth = *std::move(auth_or);
  auto alice_or = auth->AuthenticateToken("t-alice");
  ASSERT_OK(alice_or.status());
  Principal alice = *std::move(alice_or);
  EXPECT_EQ(alice.user, "alice");
  EXPECT_EQ(alice.role, Role::kSubmitter);
  EXPECT_THAT(auth->AuthenticateToken("t-bob"), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_THAT(auth->AuthenticateToken(""), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));

  std::multimap<grpc::string_ref, grpc::string_ref> md;
  EXPECT_THAT(auth->Authenticate(md),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no bearer token")));
  md.emplace("authorization", "Bearer t-root");
  auto root_or = auth->Authenticate(md);
  ASSERT_OK(root_or.status());
  Principal root = *std::move(root_or);
  EXPECT_EQ(root.role, Role::kAdmin);

  // Revoke alice, add bob; a broken file keeps the previous tokens.
  WriteFile("tokens", absl::StrCat(Authenticator::HashToken("t-bob"), " bob viewer\n"));
  ASSERT_OK(auth->Reload());
  EXPECT_THAT(auth->AuthenticateToken("t-alice"), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_OK(auth->AuthenticateToken("t-bob"));
  WriteFile("tokens", "t-bob bob viewer\n");
  EXPECT_THAT(auth->Reload(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("never the token itself")));
  EXPECT_OK(auth->AuthenticateToken("t-bob"));
}

TEST(AuthenticatorTest, RejectsMalformedFiles) {
  const std::string h = Authenticator::HashToken("x");
  EXPECT_THAT(Authenticator::FromTokenFile(WriteFile("t1", h + " alice\n")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("t1:1:")));
  EXPECT_THAT(Authenticator::FromTokenFile(WriteFile("t2", h + " alice root\n")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("unknown role 'root'")));
  EXPECT_THAT(Authenticator::FromTokenFile(WriteFile("t3", h + " a viewer\n" + h + " b admin\n"))
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("t3:2: a token listed")));
  EXPECT_THAT(Authenticator::FromTokenFile("/nonexistent/tokens").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--token_file")));
}

TEST(AuthenticatorTest, AllowAllIsAnonymousAdmin) {
  std::unique_ptr<Authenticator> auth = Authenticator::AllowAll();
  auto p_or = auth->Authenticate({});
  ASSERT_OK(p_or.status());
  Principal p = *std::move(p_or);
  EXPECT_EQ(p.user, "anonymous");
  EXPECT_EQ(p.role, Role::kAdmin);
}

baton::v1::Job JobOf(const std::string& owner, bool command) {
  baton::v1::Job job;
  job.set_id("j-000001");
  job.set_owner(owner);
  if (command) job.mutable_spec()->mutable_command()->add_argv("/bin/true");
  (*job.mutable_spec()->mutable_env())["SECRET"] = "s3cret";
  return job;
}

TEST(AccessPolicyTest, RolesAndOwnership) {
  const AccessPolicy policy;
  const Principal viewer{"vic", Role::kViewer};
  const Principal alice{"alice", Role::kSubmitter};
  const Principal bob{"bob", Role::kSubmitter};
  const Principal root{"root", Role::kAdmin};
  const baton::v1::Job job = JobOf("alice", /*command=*/false);

  EXPECT_OK(policy.CanRead(viewer));
  EXPECT_THAT(policy.CanSubmit(viewer, job.spec()),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("role viewer")));
  EXPECT_OK(policy.CanSubmit(alice, job.spec()));
  EXPECT_OK(policy.CanCancel(alice, job));
  EXPECT_THAT(policy.CanCancel(bob, job),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("of user 'alice'")));
  EXPECT_THAT(policy.CanCancel(viewer, job), StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_OK(policy.CanCancel(root, job));
  EXPECT_OK(policy.CanManageWorkers(root));
  for (const Principal& who : {viewer, alice}) {
    EXPECT_THAT(policy.CanManageWorkers(who),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("may not cordon or uncordon workers: that needs role admin")));
  }

  for (const Principal& who : {viewer, bob}) {
    baton::v1::Job seen = job;
    policy.Redact(who, &seen);
    EXPECT_EQ(seen.spec().env().at("SECRET"), "(hidden)") << who.user;
  }
  for (const Principal& who : {alice, root}) {
    baton::v1::Job seen = job;
    policy.Redact(who, &seen);
    EXPECT_EQ(seen.spec().env().at("SECRET"), "s3cret") << who.user;
  }
}

TEST(AccessPolicyTest, CommandJobRolesAreConfigurable) {
  const baton::v1::JobSpec command = JobOf("alice", /*command=*/true).spec();
  const Principal alice{"alice", Role::kSubmitter};
  EXPECT_OK(AccessPolicy().CanSubmit(alice, command));
  const AccessPolicy admins_only(AccessOptions{{Role::kAdmin}});
  EXPECT_THAT(admins_only.CanSubmit(alice, command),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("allows them for: admin")));
  EXPECT_OK(admins_only.CanSubmit(alice, JobOf("alice", false).spec()));
  EXPECT_OK(admins_only.CanSubmit({"root", Role::kAdmin}, command));
}

TEST(AccessPolicyTest, ATorchScriptModuleNeedsARoleAllowedToRunCommands) {
  baton::v1::JobSpec scripted = JobOf("alice", /*command=*/false).spec();
  scripted.mutable_trainer()->set_torchscript_path("/data/model.pt");
  const Principal alice{"alice", Role::kSubmitter};
  const AccessPolicy admins_only(AccessOptions{{Role::kAdmin}});
  EXPECT_THAT(admins_only.CanSubmit(alice, scripted),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("may not submit trainer.torchscript_path")));
  EXPECT_OK(admins_only.CanSubmit({"root", Role::kAdmin}, scripted));
  EXPECT_OK(AccessPolicy().CanSubmit(alice, scripted));
}

TEST(PeerIdentityTest, WorkerIdMustBeACertificateName) {
  EXPECT_OK(CheckWorkerIdentity({}, "w1", /*require_certificate=*/false));
  EXPECT_THAT(CheckWorkerIdentity({}, "w1", true), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_OK(CheckWorkerIdentity({"w1"}, "w1", true));
  EXPECT_THAT(CheckWorkerIdentity({"w2"}, "w1", true),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("names: w2")));
}

}  // namespace
}  // namespace baton::coordinator
