#include "server/api_keys.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "scratch_dir.h"

namespace mx::server {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;
using testing_support::WriteBytes;

const std::string kKeyA = "key-a-0123456789abcdef";
const std::string kKeyB = "key-b-0123456789abcdef";
const std::string kKeyC = "key-c-0123456789abcdef";

void ExpectBad(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

Status ParseError(const std::string& text) {
  return ParseApiKeys(text, "API keys file k").status();
}

// Writes `text` with `mode` (chmod after writing: the umask does not apply).
std::string WriteKeys(const ScratchDir& dir, const std::string& text,
                      fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
  const std::string path = dir.Sub("api_keys");
  WriteBytes(path, text);
  fs::permissions(path, mode);
  return path;
}

Result<std::unique_ptr<ApiKeys>> OpenKeys(const std::string& path, Env* env = Env::Default()) {
  return ApiKeys::Open(env, {.path = path, .admin_token = ""});
}

// The tenant RequestTenant decides, "<error>" when it refuses.
std::string TenantOf(const Caller& caller, const std::string& user) {
  Result<std::string> t = RequestTenant(caller, user);
  return t.ok() ? t.value() : "<error>";
}

class OtherUidEnv : public EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;
  uint32_t EffectiveUid() override { return target()->EffectiveUid() + 1; }
};

TEST(ApiKeysParseTest, KeysTenantsTrustedCommentsAndBlankLines) {
  auto keys =
      ParseApiKeys("# front ends\n\n" + kKeyA + " acme\n  \t\n" + kKeyB +
                       "\tpairing trusted   # pAIring names its users\r\n" + kKeyC + " acme#2\n",
                   "k");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 3u);
  EXPECT_EQ((*keys)[0].key, kKeyA);
  EXPECT_EQ((*keys)[0].tenant, "acme");
  EXPECT_FALSE((*keys)[0].trusted);
  EXPECT_EQ((*keys)[1].key, kKeyB);
  EXPECT_EQ((*keys)[1].tenant, "pairing");
  EXPECT_TRUE((*keys)[1].trusted);
  EXPECT_EQ((*keys)[2].tenant, "acme#2");  // '#' inside a word is not a comment
}

TEST(ApiKeysParseTest, MissingTenantNamesTheLine) {
  ExpectBad(ParseError("# one\n" + kKeyA + "\n"), "API keys file k line 2: a key without a tenant");
}

TEST(ApiKeysParseTest, UnknownThirdWordNamesTheLine) {
  ExpectBad(ParseError(kKeyA + " acme\n" + kKeyB + " beta admin\n"),
            "line 2: unknown word 'admin' after the tenant");
  ExpectBad(ParseError(kKeyA + " acme trusted extra\n"), "line 1: 4 words");
}

TEST(ApiKeysParseTest, DuplicateKeyNamesBothLinesNeverTheKey) {
  Status st = ParseError(kKeyA + " acme\n\n" + kKeyA + " beta\n");
  ExpectBad(st, "line 3: the same key as line 1");
  EXPECT_EQ(st.message().find(kKeyA), std::string::npos) << st.message();
}

TEST(ApiKeysParseTest, ShortOrOddKeysAreRefused) {
  Status st = ParseError("short-key-15chr acme\n");
  ExpectBad(st, "line 1: the key is 15 characters long; 16 to 512 are needed");
  EXPECT_EQ(st.message().find("short-key-15chr"), std::string::npos) << st.message();
  ExpectBad(ParseError(std::string(513, 'k') + " acme\n"), "513 characters");
  ExpectBad(ParseError("key-\xc3\xa9-0123456789abcdef acme\n"),
            "line 1: the key holds a character outside");
  ExpectBad(ParseError(kKeyA + " ac\x01me\n"), "line 1: a control character");
}

TEST(ApiKeysParseTest, TenantRules) {
  ExpectBad(ParseError(kKeyA + " acme/team\n"), "line 1: the tenant 'acme/team' holds '/'");
  ExpectBad(ParseError(kKeyA + " " + std::string(129, 't') + "\n"), "at most 128");
  ExpectBad(ParseError(kKeyA + " caf\xc3\xa9\n"),
            "the tenant holds a character outside printable ASCII");
}

TEST(ApiKeysParseTest, AFileWithoutKeysIsRefused) {
  ExpectBad(ParseError("# nothing yet\n\n"), "API keys file k holds no API keys");
  ExpectBad(ParseError(""), "holds no API keys");
}

TEST(ApiKeysParseTest, AKeyEqualToTheAdminTokenIsRefused) {
  Status st = ParseApiKeys(kKeyA + " acme\n" + kKeyB + " beta\n", "k", kKeyB).status();
  ExpectBad(st, "line 2: the key is MATRICXON_ADMIN_TOKEN");
}

TEST(ApiKeysTest, LookupFindsEveryKeyAndNothingElse) {
  ScratchDir dir("api_keys");
  auto keys = OpenKeys(WriteKeys(dir, kKeyA + " acme\n" + kKeyB + " pairing trusted\n"));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->size(), 2u);
  EXPECT_EQ((*keys)->trusted_count(), 1u);
  auto a = (*keys)->Lookup(kKeyA);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->tenant, "acme");
  EXPECT_FALSE(a->trusted);
  auto b = (*keys)->Lookup(kKeyB);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->tenant, "pairing");
  EXPECT_TRUE(b->trusted);
  EXPECT_FALSE((*keys)->Lookup("").has_value());
  EXPECT_FALSE((*keys)->Lookup(kKeyA.substr(0, kKeyA.size() - 1)).has_value());  // a prefix
  EXPECT_FALSE((*keys)->Lookup(kKeyA + "x").has_value());
  EXPECT_FALSE((*keys)->Lookup("acme").has_value());  // a tenant is not a key
}

TEST(ApiKeysTest, GroupOrOtherBitsAreRefusedNamingFileAndMode) {
  ScratchDir dir("api_keys");
  const std::string path = WriteKeys(dir, kKeyA + " acme\n",
                                     fs::perms::owner_read | fs::perms::owner_write |
                                         fs::perms::group_read | fs::perms::others_read);
  auto keys = OpenKeys(path);
  ASSERT_FALSE(keys.ok());
  ExpectBad(keys.status(), "API keys file " + path + " has mode 0644");
  ExpectBad(keys.status(), "chmod 600 " + path);
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_write);
  ExpectBad(OpenKeys(path).status(), "has mode 0420");
  fs::permissions(path, fs::perms::owner_read);  // 0400 is fine
  EXPECT_TRUE(OpenKeys(path).ok());
}

TEST(ApiKeysTest, AFileOfAnotherUserIsRefused) {
  ScratchDir dir("api_keys");
  OtherUidEnv env(Env::Default());
  auto keys = OpenKeys(WriteKeys(dir, kKeyA + " acme\n"), &env);
  ASSERT_FALSE(keys.ok());
  ExpectBad(keys.status(), "is owned by uid " + std::to_string(geteuid()) + ", not by this user");
}

TEST(ApiKeysTest, MissingFileOrFolderIsAnError) {
  ScratchDir dir("api_keys");
  auto missing = OpenKeys(dir.Sub("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound) << missing.status().ToString();
  auto folder = OpenKeys(dir.path());
  ASSERT_FALSE(folder.ok());
  ExpectBad(folder.status(), "is a folder, not a regular file");
}

TEST(ApiKeysTest, ReloadTakesNewKeysAndDropsRemovedOnes) {
  ScratchDir dir("api_keys");
  const std::string path = WriteKeys(dir, kKeyA + " acme\n");
  auto keys = OpenKeys(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_FALSE((*keys)->Lookup(kKeyB).has_value());
  WriteKeys(dir, kKeyB + " beta\n");
  ASSERT_TRUE((*keys)->Reload().ok());
  EXPECT_FALSE((*keys)->Lookup(kKeyA).has_value());
  ASSERT_TRUE((*keys)->Lookup(kKeyB).has_value());
  EXPECT_EQ((*keys)->Lookup(kKeyB)->tenant, "beta");
}

TEST(ApiKeysTest, AFailedReloadKeepsTheOldKeys) {
  ScratchDir dir("api_keys");
  const std::string path = WriteKeys(dir, kKeyA + " acme\n");
  auto keys = OpenKeys(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  WriteKeys(dir, kKeyB + " beta\n" + kKeyC + "\n");  // line 2 has no tenant
  ExpectBad((*keys)->Reload(), "line 2: a key without a tenant");
  EXPECT_TRUE((*keys)->Lookup(kKeyA).has_value());
  EXPECT_FALSE((*keys)->Lookup(kKeyB).has_value());
  WriteKeys(dir, kKeyB + " beta\n", fs::perms::owner_all | fs::perms::group_read);
  ExpectBad((*keys)->Reload(), "has mode 0740");
  EXPECT_TRUE((*keys)->Lookup(kKeyA).has_value());
  fs::remove(path);
  EXPECT_FALSE((*keys)->Reload().ok());
  EXPECT_TRUE((*keys)->Lookup(kKeyA).has_value());
}

TEST(ApiKeysTenantTest, TheKeysTenantOrTrustedTenantSlashUser) {
  EXPECT_EQ(TenantOf({}, "u1"), "");  // no API keys: one tenant, `user` ignored
  EXPECT_EQ(TenantOf({"acme", false}, ""), "acme");
  EXPECT_EQ(TenantOf({"acme", false}, "u1"), "acme");  // untrusted: `user` ignored
  EXPECT_EQ(TenantOf({"acme", false}, "bad user/\x01"), "acme");
  EXPECT_EQ(TenantOf({"pairing", true}, ""), "pairing");
  EXPECT_EQ(TenantOf({"pairing", true}, "u1"), "pairing/u1");
  EXPECT_EQ(TenantOf({"pairing", true}, std::string(128, 'u')), "pairing/" + std::string(128, 'u'));
}

TEST(ApiKeysTenantTest, ATrustedKeysUserIsChecked) {
  for (const std::string& user : {std::string(129, 'u'), std::string("a b"), std::string("a/b"),
                                  std::string("caf\xc3\xa9"), std::string("u\n")}) {
    Result<std::string> t = RequestTenant({"pairing", true}, user);
    ASSERT_FALSE(t.ok()) << user;
    ExpectBad(t.status(), "'user' must be 1 to 128 printable ASCII characters");
  }
}

TEST(ApiKeysTenantTest, BearerToken) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer  abc "), "abc");
  EXPECT_EQ(BearerToken("BEARER abc"), "abc");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken("Bearerabc"), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken(""), "");
}

}  // namespace
}  // namespace mx::server
