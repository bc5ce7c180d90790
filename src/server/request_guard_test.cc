#include "server/request_guard.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

TEST(RequestGuardTest, LoopbackHosts) {
  for (const char* h : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost."}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "attacker.example", "localhost.attacker.example", "::", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(RequestGuardTest, HostFieldOnLoopback) {
  const std::vector<std::string> extra = {"my-box.lan"};
  for (const char* h : {"localhost:8080", "127.0.0.1", "127.0.0.1:1", "[::1]:8080", "My-Box.lan:80"}) {
    EXPECT_TRUE(LoopbackHostAllowed(h, extra)) << h;
  }
  for (const char* h : {"attacker.example", "attacker.example:8080", "127.0.0.1:99999", "[::1", "",
                        "localhost:80:80", "127.0.0.1.nip.io"}) {
    EXPECT_FALSE(LoopbackHostAllowed(h, extra)) << h;
  }
}

TEST(RequestGuardTest, Origins) {
  EXPECT_EQ(NormalizeOrigin("HTTPS://App.Example:443/"), "https://app.example:443");
  EXPECT_EQ(NormalizeOrigin("null"), "");
  EXPECT_EQ(NormalizeOrigin("ftp://a"), "");
  EXPECT_EQ(NormalizeOrigin("http://a/path"), "");
  const std::vector<std::string> allowed = {"http://localhost:3000"};
  EXPECT_TRUE(OriginAllowed("http://localhost:3000", allowed));
  EXPECT_FALSE(OriginAllowed("http://localhost:3001", allowed));
  EXPECT_FALSE(OriginAllowed("null", allowed));
  EXPECT_FALSE(OriginAllowed("http://localhost:3000", {}));
  EXPECT_TRUE(OriginAllowed("null", {"*"}));
}

TEST(RequestGuardTest, OwnOriginIsThePageTheServerServed) {
  EXPECT_TRUE(IsOwnOrigin("http://127.0.0.1:8080", "127.0.0.1:8080", {}));
  EXPECT_TRUE(IsOwnOrigin("http://LocalHost:8080", "localhost:8080", {}));
  EXPECT_TRUE(IsOwnOrigin("http://[::1]:8080", "[::1]:8080", {}));
  EXPECT_TRUE(IsOwnOrigin("http://my-box.lan:8080", "my-box.lan:8080", {"my-box.lan"}));
}

TEST(RequestGuardTest, OwnOriginRefusesOtherPortsSchemesAndRebinding) {
  EXPECT_FALSE(IsOwnOrigin("http://127.0.0.1:3000", "127.0.0.1:8080", {}));   // another local app
  EXPECT_FALSE(IsOwnOrigin("https://127.0.0.1:8080", "127.0.0.1:8080", {}));  // this server speaks http
  EXPECT_FALSE(IsOwnOrigin("http://attacker.example:8080", "attacker.example:8080", {}));  // DNS rebinding
  EXPECT_FALSE(IsOwnOrigin("http://10.0.0.5:8080", "10.0.0.5:8080", {}));  // off loopback: ALLOWED_ORIGINS
  EXPECT_FALSE(IsOwnOrigin("null", "127.0.0.1:8080", {}));
  EXPECT_FALSE(IsOwnOrigin("http://127.0.0.1:8080", "", {}));
}

TEST(RequestGuardTest, Lists) {
  auto o = ParseOriginList("MATRICXON_ALLOWED_ORIGINS", "http://a.example, https://B.example:8443");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(*o, (std::vector<std::string>{"http://a.example", "https://b.example:8443"}));
  auto bad = ParseOriginList("MATRICXON_ALLOWED_ORIGINS", "a.example");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MATRICXON_ALLOWED_ORIGINS"), std::string::npos);
  EXPECT_NE(bad.status().message().find("a.example"), std::string::npos);
  auto h = ParseHostList("MATRICXON_ALLOWED_HOSTS", "Box.lan,other");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (std::vector<std::string>{"box.lan", "other"}));
  EXPECT_FALSE(ParseHostList("MATRICXON_ALLOWED_HOSTS", "box.lan:80").ok());
}

}  // namespace
}  // namespace mx::server
