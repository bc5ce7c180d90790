#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cache/crypto/aead.h"
#include "cache/crypto/key_store.h"
#include "core/fault_env.h"
#include "scratch_dir.h"

namespace mx::cache {
namespace {

using testing_support::ScratchDir;

SecretKey KeyOf(uint8_t fill) {
  std::array<uint8_t, kKeyBytes> b;
  b.fill(fill);
  return SecretKey(b);
}

std::vector<uint8_t> Bytes(std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::vector<uint8_t> SealVec(const SecretKey& key, const Nonce& nonce, std::span<const uint8_t> aad,
                             std::span<const uint8_t> plain) {
  std::vector<uint8_t> out(plain.size() + kTagBytes);
  EXPECT_TRUE(Seal(key, nonce, aad, plain, out.data()).ok());
  return out;
}

uint32_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

// NIST GCM test cases 13 and 14 (AES-256, zero key, zero IV).
TEST(AeadTest, MatchesNistKnownAnswers) {
  SecretKey zero = KeyOf(0);
  Nonce iv{};
  std::vector<uint8_t> out(kTagBytes);
  ASSERT_TRUE(Seal(zero, iv, {}, {}, out.data()).ok());
  EXPECT_EQ(ToHex(out), "530f8afbc74536b9a963b4f1c4cb738b");
  std::vector<uint8_t> p(16, 0);
  std::vector<uint8_t> sealed = SealVec(zero, iv, {}, p);
  EXPECT_EQ(ToHex(sealed), "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919");
}

TEST(AeadTest, SealThenOpenRoundTrips) {
  SecretKey key = KeyOf(7);
  Nonce nonce{};
  nonce[3] = 9;
  auto aad = Bytes("header");
  auto plain = Bytes("the quick brown fox jumps over the lazy dog");
  auto sealed = SealVec(key, nonce, aad, plain);
  std::vector<uint8_t> back(plain.size());
  ASSERT_TRUE(Open(key, nonce, aad, sealed, back.data()).ok());
  EXPECT_EQ(back, plain);
}

TEST(AeadTest, EveryFlippedByteFailsAsCorruption) {
  SecretKey key = KeyOf(1);
  Nonce nonce{};
  auto aad = Bytes("aad");
  auto plain = Bytes("sixteen bytes!!!and more");
  auto sealed = SealVec(key, nonce, aad, plain);
  std::vector<uint8_t> out(plain.size());
  for (size_t i = 0; i < sealed.size(); ++i) {  // ciphertext and tag
    auto bad = sealed;
    bad[i] ^= 0x01;
    Status st = Open(key, nonce, aad, bad, out.data());
    ASSERT_EQ(st.code(), Status::Code::kCorruption) << "byte " << i;
  }
}

TEST(AeadTest, WrongKeyNonceOrAadFails) {
  SecretKey key = KeyOf(1);
  Nonce nonce{};
  auto aad = Bytes("aad");
  auto plain = Bytes("payload");
  auto sealed = SealVec(key, nonce, aad, plain);
  std::vector<uint8_t> out(plain.size());
  EXPECT_EQ(Open(KeyOf(2), nonce, aad, sealed, out.data()).code(), Status::Code::kCorruption);
  Nonce other = nonce;
  other[11] = 1;
  EXPECT_EQ(Open(key, other, aad, sealed, out.data()).code(), Status::Code::kCorruption);
  EXPECT_EQ(Open(key, nonce, Bytes("aaD"), sealed, out.data()).code(), Status::Code::kCorruption);
}

TEST(AeadTest, StreamInPiecesMatchesSealAndOpensInPlace) {
  SecretKey key = KeyOf(5);
  Nonce nonce{};
  nonce[7] = 3;
  auto aad = Bytes("chunk aad");
  std::vector<uint8_t> plain(1000);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 7 + 1);
  const auto sealed = SealVec(key, nonce, aad, plain);
  const size_t cuts[] = {0, 1, 16, 33, 512, 999, 1000};  // odd piece sizes
  GcmStream gcm;
  for (int round = 0; round < 2; ++round) {  // the stream is reusable
    std::vector<uint8_t> out(plain.size() + kTagBytes);
    ASSERT_TRUE(gcm.BeginSeal(key, nonce, aad).ok());
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
      ASSERT_TRUE(gcm.Update(plain.data() + cuts[i], out.data() + cuts[i], cuts[i + 1] - cuts[i]).ok());
    }
    ASSERT_TRUE(gcm.FinishSeal(out.data() + plain.size()).ok());
    EXPECT_EQ(out, sealed);
    // Open in place, in pieces.
    std::vector<uint8_t> buf(sealed.begin(), sealed.end() - kTagBytes);
    ASSERT_TRUE(gcm.BeginOpen(key, nonce, aad).ok());
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
      ASSERT_TRUE(gcm.Update(buf.data() + cuts[i], buf.data() + cuts[i], cuts[i + 1] - cuts[i]).ok());
    }
    ASSERT_TRUE(gcm.FinishOpen(sealed.data() + plain.size()).ok());
    EXPECT_EQ(buf, plain);
  }
  // A changed tag or ciphertext byte fails.
  std::vector<uint8_t> bad(sealed.begin(), sealed.end());
  bad[500] ^= 4;
  ASSERT_TRUE(gcm.BeginOpen(key, nonce, aad).ok());
  ASSERT_TRUE(gcm.Update(bad.data(), bad.data(), plain.size()).ok());
  EXPECT_EQ(gcm.FinishOpen(bad.data() + plain.size()).code(), Status::Code::kCorruption);
  std::vector<uint8_t> tag(sealed.end() - kTagBytes, sealed.end());
  tag[0] ^= 1;
  std::vector<uint8_t> ct(sealed.begin(), sealed.end() - kTagBytes);
  ASSERT_TRUE(gcm.BeginOpen(key, nonce, aad).ok());
  ASSERT_TRUE(gcm.Update(ct.data(), ct.data(), ct.size()).ok());
  EXPECT_EQ(gcm.FinishOpen(tag.data()).code(), Status::Code::kCorruption);
}

TEST(AeadTest, SealedShorterThanTagIsCorruption) {
  std::vector<uint8_t> tiny(5);
  uint8_t out[1];
  EXPECT_EQ(Open(KeyOf(1), Nonce{}, {}, tiny, out).code(), Status::Code::kCorruption);
}

TEST(AeadTest, ChunkNoncesAreUniqueWithinAFile) {
  auto salt = Bytes(std::string(kSaltBytes, 's'));
  auto fk = DeriveFileKey(KeyOf(3), salt);
  ASSERT_TRUE(fk.ok());
  std::set<Nonce> seen;
  for (uint64_t i = 0; i < 5000; ++i) seen.insert(ChunkNonce(fk.value(), i));
  seen.insert(ChunkNonce(fk.value(), uint64_t{1} << 40));
  EXPECT_EQ(seen.size(), 5001u);
  EXPECT_EQ(ChunkNonce(fk.value(), 0), fk.value().nonce_base);
}

TEST(AeadTest, FileKeysDependOnSaltAndMaster) {
  auto s1 = Bytes(std::string(kSaltBytes, 'a'));
  auto s2 = Bytes(std::string(kSaltBytes, 'b'));
  auto a = DeriveFileKey(KeyOf(1), s1).value();
  auto a2 = DeriveFileKey(KeyOf(1), s1).value();
  auto b = DeriveFileKey(KeyOf(1), s2).value();
  auto c = DeriveFileKey(KeyOf(2), s1).value();
  EXPECT_TRUE(a.key == a2.key);
  EXPECT_EQ(a.nonce_base, a2.nonce_base);
  EXPECT_FALSE(a.key == b.key);
  EXPECT_FALSE(a.key == c.key);
  EXPECT_NE(a.nonce_base, b.nonce_base);
}

TEST(AeadTest, KeyIdNamesTheKey) {
  EXPECT_EQ(ComputeKeyId(KeyOf(1)), ComputeKeyId(KeyOf(1)));
  EXPECT_NE(ComputeKeyId(KeyOf(1)), ComputeKeyId(KeyOf(2)));
}

TEST(PassphraseTest, SamePassphraseGivesTheSameKeyTwice) {
  auto a = DeriveKeyFromPassphrase("correct horse battery staple");
  auto b = DeriveKeyFromPassphrase("correct horse battery staple");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a.value() == b.value());
}

TEST(PassphraseTest, DifferentPassphrasesGiveDifferentKeys) {
  auto a = DeriveKeyFromPassphrase("passphrase one");
  auto b = DeriveKeyFromPassphrase("passphrase two");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a.value() == b.value());
}

TEST(PassphraseTest, EmptyPassphraseIsRejected) {
  EXPECT_EQ(DeriveKeyFromPassphrase("").status().code(), Status::Code::kInvalidArgument);
}

TEST(KeyStoreTest, GeneratesAKeyFileWithMode0600) {
  ScratchDir dir("ks");
  const std::string cache = dir.Sub("cache");
  auto ks = KeyStore::Open(Env::Default(), cache, {});
  ASSERT_TRUE(ks.ok()) << ks.status().ToString();
  EXPECT_TRUE(ks->enabled());
  EXPECT_EQ(ks->source(), KeySource::kGenerated);
  EXPECT_STREQ(KeySourceName(ks->source()), "generated");
  EXPECT_TRUE(ks->created_key_file());
  const std::string path = cache + "/" + kKeyFileName;
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(cache), 0700u);
  EXPECT_EQ(std::filesystem::file_size(path), kKeyBytes);
  EXPECT_EQ(ks->key_id(), ComputeKeyId(ks->key()));
}

TEST(KeyStoreTest, ReopeningLoadsTheSameKey) {
  ScratchDir dir("ks");
  auto a = KeyStore::Open(Env::Default(), dir.path(), {});
  auto b = KeyStore::Open(Env::Default(), dir.path(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(b->created_key_file());
  EXPECT_EQ(b->source(), KeySource::kGenerated);
  EXPECT_TRUE(a->key() == b->key());
}

TEST(KeyStoreTest, KeyFileReadableByOthersIsRefused) {
  ScratchDir dir("ks");
  ASSERT_TRUE(KeyStore::Open(Env::Default(), dir.path(), {}).ok());
  const std::string path = dir.Sub(kKeyFileName);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {});
  ASSERT_FALSE(ks.ok());
  EXPECT_EQ(ks.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ks.status().message().find(path), std::string::npos) << ks.status().ToString();
  EXPECT_NE(ks.status().message().find("0644"), std::string::npos) << ks.status().ToString();
}

// Tests run as root here; 12345 stands for any other user.
constexpr uid_t kOtherUid = 12345;

TEST(KeyStoreTest, KeyFileOwnedByAnotherUserIsRefused) {
  ScratchDir dir("ks");
  ASSERT_TRUE(KeyStore::Open(Env::Default(), dir.path(), {}).ok());
  const std::string path = dir.Sub(kKeyFileName);
  ASSERT_EQ(::chown(path.c_str(), kOtherUid, static_cast<gid_t>(-1)), 0);
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {});
  ASSERT_FALSE(ks.ok());
  EXPECT_EQ(ks.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ks.status().message().find(path + " is owned by uid 12345"), std::string::npos)
      << ks.status().ToString();
}

TEST(KeyStoreTest, KeyFileThatIsASymlinkIsNotFollowed) {
  ScratchDir dir("ks");
  ScratchDir elsewhere("ks_other");
  ASSERT_TRUE(KeyStore::Open(Env::Default(), elsewhere.path(), {}).ok());
  std::filesystem::create_symlink(elsewhere.Sub(kKeyFileName), dir.Sub(kKeyFileName));
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {});
  ASSERT_FALSE(ks.ok());
  EXPECT_NE(ks.status().message().find("is a symbolic link"), std::string::npos)
      << ks.status().ToString();
}

TEST(KeyStoreTest, CacheFolderOpenToOthersIsChangedTo0700) {
  ScratchDir dir("ks");
  const std::string cache = dir.Sub("cache");
  std::filesystem::create_directories(cache);
  ASSERT_EQ(::chmod(cache.c_str(), 0777), 0);
  auto ks = KeyStore::Open(Env::Default(), cache, {});
  ASSERT_TRUE(ks.ok()) << ks.status().ToString();
  EXPECT_EQ(ModeOf(cache), 0700u);
}

TEST(KeyStoreTest, CacheFolderOwnedByAnotherUserIsRefused) {
  ScratchDir dir("ks");
  const std::string cache = dir.Sub("cache");
  std::filesystem::create_directories(cache);
  ASSERT_EQ(::chmod(cache.c_str(), 0777), 0);
  ASSERT_EQ(::chown(cache.c_str(), kOtherUid, static_cast<gid_t>(-1)), 0);
  auto ks = KeyStore::Open(Env::Default(), cache, {});
  ASSERT_FALSE(ks.ok());
  EXPECT_EQ(ks.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ks.status().message().find("saved-cache folder " + cache + " is owned by uid 12345"),
            std::string::npos)
      << ks.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(cache + "/" + kKeyFileName));
  EXPECT_EQ(ModeOf(cache), 0777u);  // refused, not changed
}

TEST(KeyStoreTest, KeyFileOfWrongSizeIsCorruption) {
  ScratchDir dir("ks");
  const std::string path = dir.Sub(kKeyFileName);
  testing_support::WriteBytes(path, std::string(40, 'k'));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {});
  EXPECT_EQ(ks.status().code(), Status::Code::kCorruption);
}

TEST(KeyStoreTest, PassphraseIsUsedAndNoKeyFileIsWritten) {
  ScratchDir dir("ks");
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {"my passphrase", false});
  ASSERT_TRUE(ks.ok());
  EXPECT_EQ(ks->source(), KeySource::kPassphrase);
  EXPECT_TRUE(ks->key() == DeriveKeyFromPassphrase("my passphrase").value());
  EXPECT_FALSE(std::filesystem::exists(dir.Sub(kKeyFileName)));
}

TEST(KeyStoreTest, ClusterNodeWithoutPassphraseIsOffWithAReason) {
  ScratchDir dir("ks");
  auto ks = KeyStore::Open(Env::Default(), dir.path(), {"", true});
  ASSERT_TRUE(ks.ok());
  EXPECT_FALSE(ks->enabled());
  EXPECT_EQ(ks->source(), KeySource::kNone);
  EXPECT_STREQ(KeySourceName(ks->source()), "none");
  EXPECT_NE(ks->disabled_reason().find("MATRICXON_CACHE_KEY"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub(kKeyFileName)));
}

TEST(KeyStoreTest, ClusterNodeWithPassphraseDerivesTheSharedKey) {
  ScratchDir dir("ks");
  auto node = KeyStore::Open(Env::Default(), dir.path(), {"shared secret", true});
  auto single = KeyStore::Open(Env::Default(), dir.path(), {"shared secret", false});
  ASSERT_TRUE(node.ok() && single.ok());
  EXPECT_EQ(node->source(), KeySource::kCluster);
  EXPECT_TRUE(node->key() == single->key());
  EXPECT_FALSE(std::filesystem::exists(dir.Sub(kKeyFileName)));
}

TEST(KeyStoreTest, FailedKeyWriteLeavesNoKeyFile) {
  ScratchDir dir("ks");
  FaultEnv env(Env::Default());
  env.FailNth(FaultEnv::kSync, 1, EIO);
  auto ks = KeyStore::Open(&env, dir.path(), {});
  EXPECT_EQ(ks.status().code(), Status::Code::kIOError);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub(kKeyFileName)));
}

}  // namespace
}  // namespace mx::cache
