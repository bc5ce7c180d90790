// Small HTTP and file helpers shared by the integration tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "server_process.h"

namespace mx::testing {

using Json = nlohmann::json;
namespace fs = std::filesystem;

inline std::string TempDir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("mx_it_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p / "models");
  return p.string();
}

inline bool MakeModel(const std::string& path) {
  std::string cmd = BinaryPath() + " make-model --out " + path + " --quiet";
  return std::system(cmd.c_str()) == 0;
}

struct Reply {
  int status = 0;
  Json body;
  std::string raw;
};

inline Reply Post(int port, const std::string& path, const std::string& body,
           const httplib::Headers& headers = {}) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  auto res = cli.Post(path.c_str(), headers, body, "application/json");
  Reply r;
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = Json::parse(res->body, nullptr, false);
  return r;
}

inline Reply Get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  auto res = cli.Get(path.c_str());
  Reply r;
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = Json::parse(res->body, nullptr, false);
  return r;
}

}  // namespace mx::testing
