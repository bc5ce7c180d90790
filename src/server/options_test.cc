#include "server/options.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

Result<ServerOptions> Load(std::map<std::string, std::string> flags, std::map<std::string, std::string> env) {
  return LoadServerOptions(flags, [&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

TEST(OptionsTest, Defaults) {
  auto o = Load({}, {});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->host, "127.0.0.1");
  EXPECT_EQ(o->port, 8080);
  EXPECT_EQ(o->models_dir, "./data/models");
  EXPECT_EQ(o->parallel, 4);
  EXPECT_EQ(o->max_loaded_models, 2);
  EXPECT_EQ(o->keep_alive_s, 1800);
  EXPECT_TRUE(o->admin_token.empty());
}

TEST(OptionsTest, EnvironmentAndFlags) {
  auto o = Load({{"port", "0"}}, {{"MATRICXON_PORT", "9000"}, {"MATRICXON_PARALLEL", "8"},
                                  {"MATRICXON_ADMIN_TOKEN", "s3cret"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->port, 0);  // the flag wins
  EXPECT_EQ(o->parallel, 8);
  EXPECT_EQ(o->admin_token, "s3cret");
}

TEST(OptionsTest, KvType) {
  auto d = Load({}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kv_type, DType::kF16);
  auto f = Load({{"kv-type", "f32"}}, {{"MATRICXON_KV_TYPE", "f16"}});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kv_type, DType::kF32);
  EXPECT_FALSE(f->kv_type_k.has_value());
  EXPECT_FALSE(f->kv_type_v.has_value());
  auto bad = Load({}, {{"MATRICXON_KV_TYPE", "q8"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MATRICXON_KV_TYPE='q8': expected f16, q8_0, q4_0 or f32"),
            std::string::npos)
      << bad.status().ToString();
  // Only the four KV types, spelled as in the table (not every ggml type).
  EXPECT_FALSE(Load({}, {{"MATRICXON_KV_TYPE", "q4_1"}}).ok());
  EXPECT_FALSE(Load({}, {{"MATRICXON_KV_TYPE", "Q8_0"}}).ok());
}

TEST(OptionsTest, KvTypeForKeysAndValuesApart) {
  auto q = Load({}, {{"MATRICXON_KV_TYPE", "q8_0"}});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->kv_type, DType::kQ8_0);
  auto both = Load({{"kv-type-v", "q4_0"}},
                   {{"MATRICXON_KV_TYPE", "q8_0"}, {"MATRICXON_KV_TYPE_K", "f16"}});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->kv_type, DType::kQ8_0);
  EXPECT_EQ(both->kv_type_k, DType::kF16);
  EXPECT_EQ(both->kv_type_v, DType::kQ4_0);
  auto bad = Load({{"kv-type-k", "q2_k"}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--kv-type-k='q2_k'"), std::string::npos)
      << bad.status().ToString();
}

TEST(OptionsTest, BadValueNamesVariableAndRange) {
  auto o = Load({}, {{"MATRICXON_PARALLEL", "zero"}});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("MATRICXON_PARALLEL"), std::string::npos);
  EXPECT_NE(o.status().message().find("[1, 256]"), std::string::npos);
  auto p = Load({{"port", "70000"}}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--port"), std::string::npos);
}

TEST(OptionsTest, SavedCacheSettings) {
  auto d = Load({}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->persist_prompt_cache);
  EXPECT_EQ(d->persist_cache_budget_mb, 4096);
  EXPECT_EQ(d->persist_cache_ttl_hours, 168);
  EXPECT_EQ(d->prompt_cache_dir, "./data/prompt_cache");
  EXPECT_TRUE(d->cache_key.empty());
  EXPECT_FALSE(d->cluster_node);
  auto o = Load({{"persist-cache-ttl-hours", "0"}},
                {{"MATRICXON_PERSIST_PROMPT_CACHE", "false"}, {"MATRICXON_PERSIST_CACHE_BUDGET_MB", "10"},
                 {"MATRICXON_PROMPT_CACHE_DIR", "/tmp/x"}, {"MATRICXON_CACHE_KEY", "pass"},
                 {"MATRICXON_CLUSTER_NODE", "true"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->persist_prompt_cache);
  EXPECT_EQ(o->persist_cache_budget_mb, 10);
  EXPECT_EQ(o->persist_cache_ttl_hours, 0);
  EXPECT_EQ(o->prompt_cache_dir, "/tmp/x");
  EXPECT_EQ(o->cache_key, "pass");
  EXPECT_TRUE(o->cluster_node);
  auto bad = Load({}, {{"MATRICXON_PERSIST_PROMPT_CACHE", "maybe"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MATRICXON_PERSIST_PROMPT_CACHE"), std::string::npos);
  bad = Load({}, {{"MATRICXON_PERSIST_CACHE_BUDGET_MB", "0"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MATRICXON_PERSIST_CACHE_BUDGET_MB"), std::string::npos);
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

TEST(OptionsTest, PromptCacheSettings) {
  auto o = Load({}, {});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->prompt_cache_slots, 4);
  EXPECT_EQ(o->prompt_cache_budget_mb, 2048);
  EXPECT_TRUE(o->prompt_cache_context_shift);
  EXPECT_EQ(o->prompt_cache_snapshot_every, 256);
  EXPECT_EQ(o->prompt_cache_snapshots, 8);
  EXPECT_EQ(o->prompt_cache_snapshot_mb, 256);
  o = Load({{"prompt-cache-snapshots", "3"}}, {{"MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT", "false"},
                                               {"MATRICXON_PROMPT_CACHE_SNAPSHOT_EVERY", "64"},
                                               {"MATRICXON_PROMPT_CACHE_SNAPSHOT_MB", "0"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->prompt_cache_context_shift);
  EXPECT_EQ(o->prompt_cache_snapshot_every, 64);
  EXPECT_EQ(o->prompt_cache_snapshots, 3);
  EXPECT_EQ(o->prompt_cache_snapshot_mb, 0);
  for (auto [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"MATRICXON_PROMPT_CACHE_SLOTS", "0"},
           {"MATRICXON_PROMPT_CACHE_SLOTS", "65"},
           {"MATRICXON_PROMPT_CACHE_SNAPSHOTS", "9"},
           {"MATRICXON_PROMPT_CACHE_SNAPSHOT_EVERY", "8"},
           {"MATRICXON_PROMPT_CACHE_SNAPSHOT_MB", "-1"},
           {"MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT", "maybe"}}) {
    auto bad = Load({}, {{var, value}});
    ASSERT_FALSE(bad.ok()) << var << "=" << value;
    EXPECT_NE(bad.status().message().find(var), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

TEST(OptionsTest, HttpFrontSettings) {
  auto d = Load({}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed_origins.empty());
  EXPECT_TRUE(d->allowed_hosts.empty());
  EXPECT_FALSE(d->allow_open_admin);
  EXPECT_EQ(d->max_body_bytes, 8u << 20);
  EXPECT_EQ(d->max_connections, 1024);
  EXPECT_EQ(d->max_connections_per_client, 256);
  EXPECT_EQ(d->request_head_timeout_s, 10);
  EXPECT_EQ(d->request_timeout_s, 60);
  EXPECT_EQ(d->http_idle_timeout_s, 30);
  auto o = Load({{"allowed-hosts", "Box.lan, other.lan"}, {"max-body-mb", "16"}},
                {{"MATRICXON_ALLOWED_ORIGINS", "http://localhost:3000,HTTPS://App.Example/"},
                 {"MATRICXON_ALLOW_OPEN_ADMIN", "true"}, {"MATRICXON_MAX_CONNECTIONS", "64"},
                 {"MATRICXON_REQUEST_HEAD_TIMEOUT_S", "2"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->allowed_origins, (std::vector<std::string>{"http://localhost:3000", "https://app.example"}));
  EXPECT_EQ(o->allowed_hosts, (std::vector<std::string>{"box.lan", "other.lan"}));
  EXPECT_TRUE(o->allow_open_admin);
  EXPECT_EQ(o->max_body_bytes, 16u << 20);
  EXPECT_EQ(o->max_connections, 64);
  EXPECT_EQ(o->request_head_timeout_s, 2);
  for (auto [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"MATRICXON_ALLOWED_ORIGINS", "app.example"},
           {"MATRICXON_ALLOWED_ORIGINS", "http://a/b"},
           {"MATRICXON_ALLOWED_HOSTS", "box.lan:80"},
           {"MATRICXON_ALLOW_OPEN_ADMIN", "perhaps"},
           {"MATRICXON_MAX_BODY_MB", "0"},
           {"MATRICXON_MAX_CONNECTIONS", "0"},
           {"MATRICXON_MAX_CONNECTIONS_PER_CLIENT", "70000"},
           {"MATRICXON_REQUEST_HEAD_TIMEOUT_S", "0"},
           {"MATRICXON_REQUEST_TIMEOUT_S", "x"},
           {"MATRICXON_HTTP_IDLE_TIMEOUT_S", "-1"}}) {
    auto bad = Load({}, {{var, value}});
    ASSERT_FALSE(bad.ok()) << var << "=" << value;
    EXPECT_NE(bad.status().message().find(var), std::string::npos) << bad.status().message();
  }
}

TEST(OptionsTest, TenantSettings) {
  auto d = Load({}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->api_keys_file.empty());
  EXPECT_FALSE(d->prompt_cache_sharing_tenant);
  auto o = Load({{"prompt-cache-sharing", "tenant"}},
                {{"MATRICXON_API_KEYS_FILE", "/etc/mx/keys"}, {"MATRICXON_ADMIN_TOKEN", "adm1n"},
                 {"MATRICXON_PROMPT_CACHE_SHARING", "all"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->api_keys_file, "/etc/mx/keys");
  EXPECT_TRUE(o->prompt_cache_sharing_tenant);  // the flag wins
  auto all = Load({{"api-keys-file", "k"}}, {{"MATRICXON_PROMPT_CACHE_SHARING", "all"}});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_FALSE(all->prompt_cache_sharing_tenant);

  auto bad = Load({}, {{"MATRICXON_PROMPT_CACHE_SHARING", "users"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MATRICXON_PROMPT_CACHE_SHARING='users': expected all or tenant"),
            std::string::npos)
      << bad.status().message();
  auto empty = Load({{"api-keys-file", ""}}, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("--api-keys-file is empty"), std::string::npos);
}

TEST(OptionsTest, TenantSharingNeedsKeysAndAnAdminToken) {
  auto no_keys = Load({}, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}, {"MATRICXON_ADMIN_TOKEN", "a"}});
  ASSERT_FALSE(no_keys.ok());
  EXPECT_NE(no_keys.status().message().find("needs MATRICXON_API_KEYS_FILE"), std::string::npos)
      << no_keys.status().message();
  auto no_admin = Load({}, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}, {"MATRICXON_API_KEYS_FILE", "k"}});
  ASSERT_FALSE(no_admin.ok());
  EXPECT_NE(no_admin.status().message().find("needs MATRICXON_ADMIN_TOKEN"), std::string::npos)
      << no_admin.status().message();
}

}  // namespace
}  // namespace mx::server
