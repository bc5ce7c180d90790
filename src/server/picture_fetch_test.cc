// Which addresses a picture host may resolve to without being named as an
// address in MATRICXON_IMAGE_URL_HOSTS (the fetch itself is tested through
// the real server: tests/integration/vision_server_test.cc).
#include "server/picture_fetch.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

TEST(PictureFetchTest, NonPublicAddressesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1", "loopback"},        {"127.255.3.4", "loopback"},   {"::1", "loopback"},
      {"::ffff:127.0.0.1", "loopback"}, {"10.1.2.3", "private"},       {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},    {"192.168.1.1", "private"},    {"fd00::1", "private"},
      {"fc00::1", "private"},           {"169.254.169.254", "link-local"}, {"fe80::1", "link-local"},
      {"0.0.0.0", "unspecified"},       {"::", "unspecified"},         {"100.64.0.1", "carrier-grade NAT"},
      {"224.0.0.1", "multicast"},       {"ff02::1", "multicast"},      {"240.0.0.1", "reserved"},
      {"255.255.255.255", "reserved"},  {"64:ff9b::a00:1", "private"}, {"::ffff:169.254.1.1", "link-local"},
      {"localhost", "not an address"},
  };
  for (const auto& [ip, kind] : cases) EXPECT_EQ(NonPublicAddressKind(ip), kind) << ip;
  for (const char* ip : {"8.8.8.8", "172.32.0.1", "172.15.255.255", "192.169.0.1", "100.128.0.1", "1.1.1.1",
                         "2001:4860:4860::8888", "::ffff:8.8.4.4", "11.0.0.1"}) {
    EXPECT_EQ(NonPublicAddressKind(ip), "") << ip;
  }
}

}  // namespace
}  // namespace mx::server
