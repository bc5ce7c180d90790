// Saved chats of tenants (SPEC §13, docs/disk_cache_format.md "Tenant
// tag"): the tenant is sealed in the record and bound into the file key
// through its tag; isolated lookups see only their tenant's files, after a
// restart too; forgetting a tenant deletes its files, also one being written.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "cache/crypto/aead.h"
#include "cache/disk_store/disk_test_util.h"

namespace mx::cache {
namespace {

using testing_support::ReadBytes;
using testing_support::WriteBytes;

class DiskTenantTest : public DiskStoreTestBase {
 protected:
  SavedEntryInfo SaveFor(const std::string& tenant, const std::vector<int32_t>& tokens,
                         size_t bytes = 600) {
    SaveMeta meta;
    meta.model = kModelA;
    meta.tenant = tenant;
    auto info = store_->Save(meta, tokens, Payload(bytes, 3));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info.value() : SavedEntryInfo{};
  }
};

TEST_F(DiskTenantTest, TagsAreKeyedPerTenantAndZeroForNone) {
  const SecretKey k1 = TestKey(1), k2 = TestKey(2);
  auto a = DeriveTenantTag(k1, "acme"), b = DeriveTenantTag(k1, "acme/u2"),
       a2 = DeriveTenantTag(k2, "acme");
  auto none = DeriveTenantTag(k1, "");
  ASSERT_TRUE(a.ok() && b.ok() && a2.ok() && none.ok());
  EXPECT_NE(*a, *b);
  EXPECT_NE(*a, *a2);  // another key, another tag: nobody without the key can test a guess
  EXPECT_EQ(*none, TenantTag{});
  auto a_again = DeriveTenantTag(k1, "acme");
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ(*a, *a_again);
  // The tag changes the file key.
  const Salt salt{};
  auto plain = DeriveFileKey(k1, salt), scoped = DeriveFileKey(k1, salt, *a);
  ASSERT_TRUE(plain.ok() && scoped.ok());
  EXPECT_NE(std::memcmp(plain->key.data(), scoped->key.data(), kKeyBytes), 0);
}

TEST_F(DiskTenantTest, IsolatedLookupsSeeOnlyTheirTenantAlsoAfterARestart) {
  const auto chat = Tokens(10, 200);
  SavedEntryInfo a = SaveFor("a", chat);
  EXPECT_EQ(a.tenant, "a");
  const std::string b_tenant = "b", c_tenant = "c";
  EXPECT_FALSE(store_->FindLongestPrefix(kModelA, chat, &b_tenant).found);
  const std::string a_tenant = "a";
  EXPECT_TRUE(store_->FindLongestPrefix(kModelA, chat, &a_tenant).found);
  EXPECT_TRUE(store_->FindLongestPrefix(kModelA, chat).found);  // shared lookups see everyone's
  SavedEntryInfo b = SaveFor("b", chat);
  auto reopened = Reopen();
  PrefixMatch mb = reopened->FindLongestPrefix(kModelA, chat, &b_tenant);
  ASSERT_TRUE(mb.found);
  EXPECT_EQ(mb.entry.id, b.id);
  EXPECT_EQ(mb.entry.tenant, "b");
  PrefixMatch ma = reopened->FindLongestPrefix(kModelA, chat, &a_tenant);
  ASSERT_TRUE(ma.found);
  EXPECT_EQ(ma.entry.id, a.id);
  EXPECT_FALSE(reopened->FindLongestPrefix(kModelA, chat, &c_tenant).found);
  auto loaded = reopened->Load(a.id, kModelA);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tokens, chat);
  EXPECT_EQ(loaded->info.tenant, "a");
}

// A file's header names its tenant only by the keyed tag, which is part of
// every chunk's associated data and of the file key: a file moved to
// another tenant's tag (or to no tenant) opens for nobody.
TEST_F(DiskTenantTest, AFileCannotBeMovedToAnotherTenant) {
  SavedEntryInfo a = SaveFor("a", Tokens(10, 50));
  SavedEntryInfo b = SaveFor("b", Tokens(10, 50));
  std::string fa = ReadBytes(PathOf(a.id)), fb = ReadBytes(PathOf(b.id));
  std::memcpy(fa.data() + 56, fb.data() + 56, kTenantTagBytes);  // A's file, B's tag
  WriteBytes(PathOf(a.id), fa);
  auto forged = store_->Load(a.id, kModelA);
  EXPECT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().code(), Status::Code::kCorruption);
  std::string fz = ReadBytes(PathOf(b.id));
  std::memset(fz.data() + 56, 0, kTenantTagBytes);  // B's file as nobody's
  WriteBytes(PathOf(b.id), fz);
  StartupReport report;
  auto reopened = Reopen(&report);
  EXPECT_EQ(report.files_ok, 0u);
  EXPECT_EQ(report.removed_damaged, 1u);  // a was deleted by its failed load already
  EXPECT_TRUE(reopened->List().empty());
}

TEST_F(DiskTenantTest, ForgettingATenantDeletesItsFilesOnly) {
  SavedEntryInfo a1 = SaveFor("a", Tokens(10, 50));
  SavedEntryInfo a2 = SaveFor("a", Tokens(500, 80));
  SavedEntryInfo b = SaveFor("b", Tokens(10, 50));
  SavedEntryInfo none = SaveFor("", Tokens(900, 20));
  auto removed = store_->ForgetTenant("a");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->files, 2u);
  EXPECT_EQ(removed->bytes, a1.file_bytes + a2.file_bytes);
  EXPECT_FALSE(std::filesystem::exists(PathOf(a1.id)));
  EXPECT_FALSE(std::filesystem::exists(PathOf(a2.id)));
  EXPECT_TRUE(std::filesystem::exists(PathOf(b.id)));
  EXPECT_TRUE(std::filesystem::exists(PathOf(none.id)));
  auto reopened = Reopen();
  EXPECT_EQ(reopened->List().size(), 2u);
  auto again = reopened->ForgetTenant("a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files, 0u);
}

TEST_F(DiskTenantTest, AnOverlongTenantIsRefused) {
  SaveMeta meta;
  meta.model = kModelA;
  meta.tenant = std::string(kMaxTenantBytes + 1, 't');
  auto info = store_->Save(meta, Tokens(1, 5), Payload(10, 1));
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("tenant"), std::string::npos);
}

}  // namespace
}  // namespace mx::cache
