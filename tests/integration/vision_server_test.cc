// Pictures through the real server (SPEC §11) on the reference tiny-qwen35
// and its projector: llama.cpp's logits and greedy tokens for the reference
// pictures over /v1/chat/completions, the cache rule (fresh by default; in
// the hash mode the same picture reuses its chat, another never past the
// text before it, and the hash survives a restart in the saved caches),
// remote URLs only from allowed hosts, and the limits and bad pictures as
// clear 400 / 413 answers.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <fstream>
#include <sstream>
#include <thread>

#include "http_helpers.h"
#include "image/test_encode.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const Json& Ref() {
  static const Json* ref = new Json(LoadRefJson("ref-tiny-qwen35-vision.json"));
  return *ref;
}

const Json& RefRun(const std::string& name) {
  for (const Json& r : Ref()["runs"]) {
    if (r["name"] == name) return r;
  }
  static const Json none;
  ADD_FAILURE() << name;
  return none;
}

std::string Base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 |
                       static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1])
                                                                  << 8;
    for (int s : {18, 12, 6}) out += kAlphabet[(v >> s) & 63];
    out += "=";
  }
  return out;
}

std::string PngPath(const std::string& image) {
  return std::string(MATRICXON_REF_DIR) + "/" + Ref()["images"][image]["file"].get<std::string>();
}
std::string DataUrl(const std::string& bytes) { return "data:image/png;base64," + Base64(bytes); }

// The reference messages with the picture as an image_url part in the
// marker's place (parts joined with nothing between them).
Json Messages(const std::vector<std::string>& urls) {
  Json parts = Json::array();
  parts.push_back({{"type", "text"}, {"text", "Describe this picture:\n"}});
  for (const std::string& u : urls)
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", u}}}});
  parts.push_back({{"type", "text"}, {"text", "\nWhat is in the middle?"}});
  return Json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                      {{"role", "user"}, {"content", parts}}});
}

struct VisionReply {
  int status = 0;
  std::string raw, text;
  std::vector<std::string> pieces;
  std::vector<Json> top;  // per token: [{token bytes, logprob}, ...]
  int64_t prompt_tokens = 0, cached = 0;
};

VisionReply Ask(int port, const Json& messages, bool cache = true, int max_tokens = 16) {
  Json body = {{"model", "tiny"},   {"messages", messages}, {"max_tokens", max_tokens},
               {"temperature", 0},  {"ignore_eos", true},   {"logprobs", true},
               {"top_logprobs", 5}, {"cache_prompt", cache}};
  Reply r = Post(port, "/v1/chat/completions", body.dump());
  VisionReply v;
  v.status = r.status;
  v.raw = r.raw;
  if (r.status != 200) return v;
  v.text = r.body["choices"][0]["message"]["content"].get<std::string>();
  for (const Json& tok : r.body["choices"][0]["logprobs"]["content"]) {
    std::string bytes;
    for (const Json& b : tok["bytes"]) bytes += static_cast<char>(b.get<int>());
    v.pieces.push_back(bytes);
    v.top.push_back(tok["top_logprobs"]);
  }
  v.prompt_tokens = r.body["usage"]["prompt_tokens"].get<int64_t>();
  v.cached = r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  return v;
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class VisionServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    ASSERT_FALSE(Ref().is_discarded()) << "ref-tiny-qwen35-vision.json";
    dir_ = TempDir(std::string("vision_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const std::string ref = std::string(MATRICXON_REF_DIR) + "/models/";
    fs::copy_file(ref + "tiny-qwen35.gguf", dir_ + "/models/tiny.gguf");
    fs::copy_file(ref + "tiny-qwen35-mmproj.gguf", dir_ + "/models/tiny.mmproj.gguf");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    server_ = std::make_unique<ServerProcess>();
    // F32 keys and values, as llama.cpp's reference ran.
    args.insert(args.end(), {"--threads", "2", "--kv-type", "f32"});
    if (std::find(args.begin(), args.end(), "--ctx-size") == args.end()) {
      args.insert(args.end(), {"--ctx-size", "1024"});
    }
    env["MATRICXON_MODELS_DIR"] = dir_ + "/models";
    env["MATRICXON_PROMPT_CACHE_DIR"] = dir_ + "/prompt_cache";
    std::string error;
    ASSERT_TRUE(
        server_->Start(args, env, dir_ + "/server" + std::to_string(++starts_) + ".log", &error))
        << error;
  }
  int port() const { return server_->port(); }
  std::string Log() const { return server_->Log(); }

  // The reply equals llama.cpp's greedy tokens while their margin is above
  // our end-to-end error, and each step's top-5 log-probabilities equal
  // llama.cpp's (logit - logsumexp of the row) within 0.02.
  void ExpectReference(const std::string& run_name, const VisionReply& r) {
    const Json& run = RefRun(run_name);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(run["rows"]["token"].size()));
    const Json& greedy = run["greedy"];
    size_t compared = 0;
    for (size_t i = 0; i < greedy["pieces_hex"].size() && i < r.pieces.size(); ++i) {
      if (greedy["margin_top1_top2"][i].get<double>() < 0.02) break;
      EXPECT_EQ(r.pieces[i], FromHex(greedy["pieces_hex"][i].get<std::string>()))
          << run_name << " step " << i;
      ++compared;
    }
    EXPECT_GE(compared, 8u) << run_name;
    // The first token's distribution: the last prompt row of the reference.
    const size_t last = run["rows"]["token"].size() - 1;
    const double lse = run["logsumexp_per_position"][last].get<double>();
    const Json& want = run["top5_per_position"][last];
    ASSERT_FALSE(r.top.empty());
    ASSERT_EQ(r.top[0].size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_NEAR(r.top[0][k]["logprob"].get<double>(), want[k][1].get<double>() - lse, 0.02)
          << run_name << " top " << k;
    }
  }

  std::string dir_;
  int starts_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(VisionServerTest, ReferencePicturesGiveLlamaCppsTokensAndLogits) {
  Start({"--persist-prompt-cache", "false"});
  for (const char* image : {"a", "b", "c"}) {
    VisionReply r = Ask(port(), Messages({DataUrl(ReadFile(PngPath(image)))}));
    ExpectReference(std::string("image-") + image, r);
    EXPECT_EQ(r.cached, 0);
  }
  // The text alone, for comparison: the prompt without the picture.
  Json plain = Json::array(
      {{{"role", "system"}, {"content", "You are a helpful assistant."}},
       {{"role", "user"}, {"content", "Describe this picture:\n\nWhat is in the middle?"}}});
  ExpectReference("no-image", Ask(port(), plain));
}

// A and C have the same size and text: the prompts differ only in the
// picture's rows, yet the first token's distribution differs.
TEST_F(VisionServerTest, AnotherPictureOfTheSameSizeChangesTheReply) {
  Start({"--persist-prompt-cache", "false"});
  VisionReply a = Ask(port(), Messages({DataUrl(ReadFile(PngPath("a")))}));
  VisionReply c = Ask(port(), Messages({DataUrl(ReadFile(PngPath("c")))}));
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_EQ(a.prompt_tokens, c.prompt_tokens);
  double max_diff = 0;
  for (size_t k = 0; k < 5; ++k) {
    max_diff = std::max(max_diff, std::fabs(a.top[0][k]["logprob"].get<double>() -
                                            c.top[0][k]["logprob"].get<double>()));
  }
  EXPECT_GT(max_diff, 0.05);
  EXPECT_NE(a.pieces, c.pieces);
}

TEST_F(VisionServerTest, PicturesStartFreshByDefault) {
  Start({"--persist-prompt-cache", "false"});
  const Json m = Messages({DataUrl(ReadFile(PngPath("a")))});
  VisionReply first = Ask(port(), m);
  VisionReply again = Ask(port(), m);
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.cached, 0);
  EXPECT_EQ(again.pieces, first.pieces);
  EXPECT_EQ(Count(Log(), "re-reading the entire chat (73 tokens): the prompt has images"), 2u)
      << Log();
  EXPECT_EQ(Count(Log(), "encoded in"), 2u) << Log();
}

// The hash mode: the next turn of a chat with a picture reuses everything
// up to its new message and never encodes the picture again; its reply is
// the one read from nothing. Another picture in the same place reuses at
// most the text before it.
TEST_F(VisionServerTest, HashModeReusesTheSamePictureOnly) {
  Start({"--persist-prompt-cache", "false"}, {{"MATRICXON_PROMPT_CACHE_IMAGES", "hash"}});
  const std::string a = DataUrl(ReadFile(PngPath("a")));
  VisionReply t1 = Ask(port(), Messages({a}), true, 8);
  ASSERT_EQ(t1.status, 200) << t1.raw;
  Json m2 = Messages({a});
  m2.push_back({{"role", "assistant"}, {"content", t1.text}});
  m2.push_back({{"role", "user"}, {"content", "And the corners?"}});
  VisionReply t2 = Ask(port(), m2, true, 8);
  ASSERT_EQ(t2.status, 200) << t2.raw;
  EXPECT_GT(t2.cached, 49) << Log();  // past the picture's rows (34..48)
  EXPECT_EQ(Count(Log(), "encoded in"), 1u) << Log();
  VisionReply cold = Ask(port(), m2, /*cache=*/false, 8);
  ASSERT_EQ(cold.status, 200) << cold.raw;
  EXPECT_EQ(cold.cached, 0);
  EXPECT_EQ(t2.pieces, cold.pieces);
  EXPECT_EQ(t2.top, cold.top);

  VisionReply other = Ask(port(), Messages({DataUrl(ReadFile(PngPath("c")))}), true, 8);
  ASSERT_EQ(other.status, 200) << other.raw;
  EXPECT_LE(other.cached, 34);
  VisionReply other_cold = Ask(port(), Messages({DataUrl(ReadFile(PngPath("c")))}), false, 8);
  EXPECT_EQ(other.pieces, other_cold.pieces);
}

TEST_F(VisionServerTest, HashModeChatsSurviveARestart) {
  const std::map<std::string, std::string> env = {{"MATRICXON_PROMPT_CACHE_IMAGES", "hash"}};
  Start({}, env);
  const std::string a = DataUrl(ReadFile(PngPath("a")));
  VisionReply t1 = Ask(port(), Messages({a}), true, 8);
  ASSERT_EQ(t1.status, 200) << t1.raw;
  ASSERT_EQ(server_->StopWith(SIGTERM), 0) << Log();  // writes the cached chat
  Start({}, env);
  Json m2 = Messages({a});
  m2.push_back({{"role", "assistant"}, {"content", t1.text}});
  m2.push_back({{"role", "user"}, {"content", "And the corners?"}});
  VisionReply t2 = Ask(port(), m2, true, 8);
  ASSERT_EQ(t2.status, 200) << t2.raw;
  EXPECT_GT(t2.cached, 49) << Log();
  EXPECT_NE(Log().find("tokens from disk"), std::string::npos) << Log();
  EXPECT_EQ(Count(Log(), "encoded in"), 0u) << Log();
  // Another picture does not match the saved chat past its text.
  VisionReply c = Ask(port(), Messages({DataUrl(ReadFile(PngPath("c")))}), true, 8);
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_LE(c.cached, 34);
}

TEST_F(VisionServerTest, ModelsSayWhichTakePictures) {
  fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen3.gguf",
                dir_ + "/models/plain.gguf");
  Start({"--persist-prompt-cache", "false"});
  Reply list = Get(port(), "/v1/models");
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.body["data"].size(), 2u) << list.raw;  // the projector is no model
  for (const Json& m : list.body["data"]) {
    const bool vision = m["capabilities"].dump().find("vision") != std::string::npos;
    EXPECT_EQ(vision, m["id"] == "tiny") << m.dump();
  }
  Reply api = Get(port(), "/api/models");
  ASSERT_EQ(api.status, 200);
  for (const Json& m : api.body["models"]) {
    if (m["name"] == "tiny") {
      EXPECT_EQ(m["projector"], "tiny.mmproj.gguf");
    } else {
      EXPECT_TRUE(m["projector"].is_null()) << m.dump();
    }
  }
  Json body = {{"model", "plain"},
               {"messages", Messages({DataUrl(ReadFile(PngPath("a")))})},
               {"max_tokens", 2}};
  Reply r = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("does not take pictures"), std::string::npos) << r.raw;
}

// tiny-llama256 is 256 wide, the projector gives 128.
TEST_F(VisionServerTest, AProjectorOfAnotherWidthNamesBothFiles) {
  fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-llama256-q4_k_m.gguf",
                dir_ + "/models/other.gguf");
  fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen35-mmproj.gguf",
                dir_ + "/models/mmproj-other.gguf");
  Start({"--persist-prompt-cache", "false"});
  Json body = {{"model", "other"},
               {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
               {"max_tokens", 2}};
  Reply r = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("other.gguf"), std::string::npos) << r.raw;
  EXPECT_NE(r.raw.find("mmproj-other.gguf"), std::string::npos) << r.raw;
  EXPECT_NE(r.raw.find("256"), std::string::npos) << r.raw;
}

TEST_F(VisionServerTest, BadPicturesAndLimitsGetClearAnswers) {
  Start({"--persist-prompt-cache", "false"},
        {{"MATRICXON_IMAGE_MAX_MB", "1"}, {"MATRICXON_MAX_IMAGES", "2"}});
  const std::string png = ReadFile(PngPath("a"));
  auto ask = [&](const Json& messages) {
    Json body = {{"model", "tiny"}, {"messages", messages}, {"max_tokens", 2}};
    return Post(port(), "/v1/chat/completions", body.dump());
  };
  struct Case {
    std::string url;
    int status;
    std::string says;
  } cases[] = {
      {DataUrl(png.substr(0, png.size() / 2)), 400, "truncated"},
      {DataUrl("<html>not a picture</html>"), 400, "not a PNG, JPEG, WebP or GIF"},
      {DataUrl(std::string(1500000, 'x')), 413, "MATRICXON_IMAGE_MAX_MB"},
      {"data:image/png;base64,***", 400, "not base64"},
      {"data:image/png,rawbytes", 400, "not base64"},
      {"http://example.com/a.png", 400, "MATRICXON_IMAGE_URL_HOSTS"},
      {"file:///etc/passwd", 400, "expected a data: URL"},
  };
  for (const Case& c : cases) {
    Reply r = ask(Messages({c.url}));
    EXPECT_EQ(r.status, c.status) << c.says << ": " << r.raw;
    EXPECT_NE(r.raw.find(c.says), std::string::npos) << r.raw;
  }
  const std::string url = DataUrl(png);
  Reply three = ask(Messages({url, url, url}));
  EXPECT_EQ(three.status, 400) << three.raw;
  EXPECT_NE(three.raw.find("MATRICXON_MAX_IMAGES"), std::string::npos) << three.raw;
  // Two pictures are fine, and the server still answers after all that.
  Reply two = ask(Messages({url, url}));
  EXPECT_EQ(two.status, 200) << two.raw;
}

// A remote picture from an allowed host (a real HTTP server on loopback) is
// fetched and gives the data: URL's reply; a redirect is not followed.
TEST_F(VisionServerTest, RemotePicturesOnlyFromAllowedHosts) {
  const std::string png = ReadFile(PngPath("a"));
  httplib::Server pictures;
  pictures.Get("/a.png", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(png, "image/png");
  });
  pictures.Get("/moved.png", [&](const httplib::Request&, httplib::Response& res) {
    res.set_redirect("http://127.0.0.1/a.png");
  });
  const int pic_port = pictures.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { pictures.listen_after_bind(); });
  Start({"--persist-prompt-cache", "false"}, {{"MATRICXON_IMAGE_URL_HOSTS", "127.0.0.1"}});
  const std::string base = "http://127.0.0.1:" + std::to_string(pic_port);
  VisionReply remote = Ask(port(), Messages({base + "/a.png"}));
  VisionReply local = Ask(port(), Messages({DataUrl(png)}));
  EXPECT_EQ(remote.status, 200) << remote.raw;
  EXPECT_EQ(remote.pieces, local.pieces);
  Json body = {{"model", "tiny"}, {"messages", Messages({base + "/moved.png"})}, {"max_tokens", 2}};
  Reply moved = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(moved.status, 400) << moved.raw;
  EXPECT_NE(moved.raw.find("redirects are not followed"), std::string::npos) << moved.raw;
  body["messages"] = Messages({"http://localhost:" + std::to_string(pic_port) + "/a.png"});
  Reply other = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(other.status, 400) << other.raw;
  EXPECT_NE(other.raw.find("does not fetch from 'localhost'"), std::string::npos) << other.raw;
  pictures.stop();
  serving.join();
}

// A host name in the list does not make its loopback address fetchable
// (any client could otherwise probe the server's own ports): `localhost` is
// refused naming the address, until the list names 127.0.0.1 itself. A
// picture server that sends a byte every 200 ms is cut at the fetch's
// deadline (1 s here), not kept alive by each byte.
TEST_F(VisionServerTest, RemotePicturesFromLoopbackNeedTheAddressListedAndADeadline) {
  const std::string png = ReadFile(PngPath("a"));
  httplib::Server pictures;
  pictures.Get("/a.png", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(png, "image/png");
  });
  pictures.Get("/slow.png", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("image/png", [&](size_t offset, httplib::DataSink& sink) {
      if (offset >= png.size() || offset > 60) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return sink.write(png.data() + offset, 1);
    });
  });
  const int pic_port = pictures.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { pictures.listen_after_bind(); });
  Start({"--persist-prompt-cache", "false"}, {{"MATRICXON_IMAGE_URL_HOSTS", "localhost"},
                                              {"MATRICXON_IMAGE_FETCH_TIMEOUT_S", "1"}});
  const std::string by_name = "http://localhost:" + std::to_string(pic_port);
  Json body = {{"model", "tiny"}, {"messages", Messages({by_name + "/a.png"})}, {"max_tokens", 2}};
  Reply named = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(named.status, 400) << named.raw;
  EXPECT_NE(named.raw.find("'localhost' is 127.0.0.1, a loopback address"), std::string::npos) << named.raw;
  server_.reset();
  Start({"--persist-prompt-cache", "false"}, {{"MATRICXON_IMAGE_URL_HOSTS", "localhost,127.0.0.1"},
                                              {"MATRICXON_IMAGE_FETCH_TIMEOUT_S", "1"}});
  EXPECT_EQ(Ask(port(), Messages({by_name + "/a.png"})).status, 200);
  const auto t0 = std::chrono::steady_clock::now();
  body["messages"] = Messages({by_name + "/slow.png"});
  Reply slow = Post(port(), "/v1/chat/completions", body.dump());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(slow.status, 400) << slow.raw;
  EXPECT_NE(slow.raw.find("not fetched within 1 s"), std::string::npos) << slow.raw;
  EXPECT_LT(seconds, 6.0) << "the drip (a byte every 200 ms, 12 s in all) held the fetch";
  pictures.stop();
  serving.join();
}

// Pictures of a prompt too long for the context: six requests at once with
// eight pictures each, every picture a 2400 x 2400 PNG of a few KB whose
// pixels and canvas are tens of MB. Each picture is checked (decoded) with at
// most two at a time server-wide and then kept as its file's bytes, so the
// server never holds 48 decoded pictures (gigabytes once), and each request
// is refused as too long.
TEST_F(VisionServerTest, PicturesOfAPromptTooLongHoldOnlyTheirBytes) {
  image::RgbImage big;
  big.width = big.height = 2400;
  big.rgb.assign(size_t{2400} * 2400 * 3, 0);
  for (size_t i = 0; i < big.rgb.size(); i += 3) big.rgb[i] = static_cast<uint8_t>((i / 7200) % 256);
  const image::testing::Bytes png = image::testing::EncodePngRgb(big);
  ASSERT_FALSE(png.empty());
  ASSERT_LT(png.size(), size_t{1} << 20);
  const std::string url = DataUrl(std::string(png.begin(), png.end()));
  Start({"--persist-prompt-cache", "false"});
  ASSERT_EQ(Ask(port(), Messages({DataUrl(ReadFile(PngPath("a")))})).status, 200);  // warm
  const int64_t base = StatusMb(server_->pid(), "VmRSS");
  ResetPeakRss(server_->pid());
  const std::string body =
      Json{{"model", "tiny"}, {"messages", Messages(std::vector<std::string>(8, url))}, {"max_tokens", 2}}.dump();
  std::vector<std::thread> clients;
  std::vector<Reply> replies(6);
  for (int i = 0; i < 6; ++i) clients.emplace_back([&, i] { replies[i] = Post(port(), "/v1/chat/completions", body); });
  for (auto& t : clients) t.join();
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
    EXPECT_NE(r.raw.find("context_length_exceeded"), std::string::npos) << r.raw.substr(0, 300);
  }
  const int64_t growth = StatusMb(server_->pid(), "VmHWM") - base;
  // Two pictures decoded at a time (17 MB of pixels, a canvas of floats
  // each) plus the requests' bodies and files.
  EXPECT_LE(growth, 400) << growth << " MiB";
  std::cerr << "peak RSS growth " << growth << " MiB\n";
}

// A large picture takes a while to encode; the model's other replies go on
// meanwhile (the picture is encoded off the compute loop): a stream running
// all through the encode keeps receiving tokens, with no gap of half the
// encode's length.
TEST_F(VisionServerTest, OtherRepliesGoOnWhileAPictureIsEncoded) {
  image::RgbImage big;
  big.width = big.height = 1800;
  big.rgb.resize(size_t{1800} * 1800 * 3);
  for (size_t i = 0; i < big.rgb.size(); ++i) big.rgb[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  const image::testing::Bytes png = image::testing::EncodePngRgb(big);
  ASSERT_FALSE(png.empty());
  Start({"--persist-prompt-cache", "false", "--ctx-size", "8192", "--parallel", "2"});
  ASSERT_EQ(Ask(port(), Messages({DataUrl(ReadFile(PngPath("a")))})).status, 200);  // warm
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> events;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::thread streaming([&] {
    httplib::Client cli("127.0.0.1", port());
    cli.set_read_timeout(120, 0);
    Json body = {{"model", "tiny"},
                 {"messages", {{{"role", "user"}, {"content", "Tell a long story."}}}},
                 {"max_tokens", 7000},
                 {"ignore_eos", true},
                 {"stream", true}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(Clock::now());
      return !stop.load();
    };
    cli.send(req);
  });
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu);
    return events.size() > 20;
  }));
  const auto t0 = Clock::now();
  Json ask = {{"model", "tiny"}, {"messages", Messages({DataUrl(std::string(png.begin(), png.end()))})},
              {"max_tokens", 1}};
  Reply r = Post(port(), "/v1/chat/completions", ask.dump());
  const auto t1 = Clock::now();
  stop = true;
  streaming.join();
  ASSERT_EQ(r.status, 200) << r.raw.substr(0, 300);
  const std::string log = Log();
  const size_t at = log.rfind(") encoded in ");
  ASSERT_NE(at, std::string::npos) << log;
  const long encode_ms = std::atol(log.c_str() + at + 13);
  ASSERT_GE(encode_ms, 300) << "the picture must take a while to encode for this test";
  double longest_gap_ms = 0;
  size_t during = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 1; i < events.size(); ++i) {
      if (events[i] < t0 || events[i - 1] > t1) continue;
      ++during;
      longest_gap_ms = std::max(longest_gap_ms,
                                std::chrono::duration<double, std::milli>(events[i] - events[i - 1]).count());
    }
  }
  EXPECT_GT(during, 10u);
  EXPECT_LT(longest_gap_ms, encode_ms / 2.0) << "the stream stalled while the picture was encoded (" << encode_ms
                                             << " ms)";
  std::cerr << "encode " << encode_ms << " ms, " << during << " stream events meanwhile, longest gap "
            << longest_gap_ms << " ms\n";
}

// `make-model --with-projector` writes a model and its projector that the
// server pairs by name and that take pictures.
TEST_F(VisionServerTest, MakeModelWritesAPairTheServerServes) {
  const std::string out = dir_ + "/models/made.gguf";
  const std::string cmd =
      BinaryPath() + " make-model --preset tiny-qwen35 --with-projector --out " + out + " --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(fs::exists(dir_ + "/models/made.mmproj.gguf"));
  Start({"--persist-prompt-cache", "false"});
  Json body = {{"model", "made"},
               {"messages", Messages({DataUrl(ReadFile(PngPath("b")))})},
               {"max_tokens", 3}};
  Reply r = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_GT(r.body["usage"]["prompt_tokens"].get<int64_t>(), 10)
      << r.raw;  // text + the 5x2 picture
  EXPECT_NE(Log().find("image 1 of 1 (5x2 rows) encoded in"), std::string::npos) << Log();
}

}  // namespace
}  // namespace mx::testing
