#include "server/persistence_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fifo_trap.h"
#include "scratch_dir.h"

namespace mx::server {
namespace {

Status Patch(const std::string& body, std::string* field) {
  return ApplyPolicyPatch(PersistencePolicy{}, body, field).status();
}

TEST(PersistencePolicyTest, AppliesAnySubsetOfFields) {
  auto p = ApplyPolicyPatch(PersistencePolicy{}, R"({"budget_mb": 10})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->budget_mb, 10);
  EXPECT_TRUE(p->enabled);
  EXPECT_EQ(p->ttl_hours, 168);
  p = ApplyPolicyPatch(*p, R"({"enabled": false, "ttl_hours": 0})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (PersistencePolicy{false, 10, 0}));
}

TEST(PersistencePolicyTest, ErrorsNameTheField) {
  std::string field;
  EXPECT_FALSE(Patch("{not json", &field).ok());
  EXPECT_EQ(field, "");
  EXPECT_FALSE(Patch("[1]", &field).ok());
  Status st = Patch(R"({"budget_mb": 0})", &field);
  EXPECT_EQ(field, "budget_mb");
  EXPECT_NE(st.message().find("budget_mb"), std::string::npos);
  EXPECT_FALSE(Patch(R"({"budget_mb": 16777217})", &field).ok());
  EXPECT_FALSE(Patch(R"({"budget_mb": 1.5})", &field).ok());
  EXPECT_FALSE(Patch(R"({"budget_mb": 18446744073709551615})", &field).ok());
  st = Patch(R"({"ttl_hours": -1})", &field);
  EXPECT_EQ(field, "ttl_hours");
  st = Patch(R"({"enabled": "yes"})", &field);
  EXPECT_EQ(field, "enabled");
  st = Patch(R"({"budget_mb": 5, "colour": 1})", &field);
  EXPECT_EQ(field, "colour");
  EXPECT_NE(st.message().find("unknown field 'colour'"), std::string::npos);
}

TEST(PersistencePolicyTest, FileRoundTrips) {
  const std::string dir = std::string(::testing::TempDir()) + "/policy_test_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(LoadPolicyFile(Env::Default(), dir).status().code(), Status::Code::kNotFound);
  ASSERT_TRUE(SavePolicyFile(Env::Default(), dir, {false, 12, 3}).ok());
  auto p = LoadPolicyFile(Env::Default(), dir);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (PersistencePolicy{false, 12, 3}));
  EXPECT_EQ(std::filesystem::status(dir + "/" + kPolicyFileName).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // A damaged file is an error naming the file (the server then uses the environment).
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir + "/" + kPolicyFileName, R"({"budget_mb": -1})", 0600).ok());
  auto bad = LoadPolicyFile(Env::Default(), dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(kPolicyFileName), std::string::npos);
  EXPECT_NE(bad.status().message().find("budget_mb"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(PersistencePolicyTest, PolicyFileThatIsAFifoOrSymlinkIsRefusedWithoutBlocking) {
  testing_support::ScratchDir dir("policy");
  const std::string path = dir.Sub(kPolicyFileName);
  {
    testing_support::FifoTrap fifo(path);
    ASSERT_TRUE(fifo.ok());
    auto p = LoadPolicyFile(Env::Default(), dir.path());
    EXPECT_FALSE(fifo.hung()) << "reading the policy blocked on a FIFO";
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find(path + " is a FIFO"), std::string::npos)
        << p.status().ToString();
  }
  std::filesystem::remove(path);
  ASSERT_TRUE(SavePolicyFile(Env::Default(), dir.Sub("elsewhere"), {false, 12, 3}).ok());
  std::filesystem::create_symlink(dir.Sub("elsewhere/" + std::string(kPolicyFileName)), path);
  auto linked = LoadPolicyFile(Env::Default(), dir.path());
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().code(), Status::Code::kNotFound);
  EXPECT_NE(linked.status().message().find("is a symbolic link"), std::string::npos)
      << linked.status().ToString();
  std::filesystem::remove(dir.Sub("elsewhere/" + std::string(kPolicyFileName)));
  EXPECT_NE(LoadPolicyFile(Env::Default(), dir.path()).status().code(), Status::Code::kNotFound)
      << "a dangling link is not 'no policy'";
}

}  // namespace
}  // namespace mx::server
