// Hostile inputs against the real server binary, around loading models and
// rendering their templates: a request body with a huge chat_template_kwargs,
// a model whose template spends its time in string operations, asking for a
// vision projector as if it were a model, a model file with a 10 GB empty
// tail. Each must be refused (or rendered within the template engine's
// budget) in seconds, without blocking other models' loads, without unloading
// anything, and SIGTERM must still stop the server at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string ChatBody(const std::string& model) {
  return Json{{"model", model}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump();
}

// CPU seconds (user + system) the process has used, from /proc.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A template that upper-cases a 16 MB string 100 000 times: hours of work
// unless every string operation is charged to the engine's step budget.
constexpr char kStringHeavyTemplate[] =
    "{% set s = 'x' * 16000000 %}{% for i in range(100000) %}"
    "{% if 'y' in s.upper() %}{{ i }}{% endif %}{% endfor %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";

class HostileLoadServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("hostile_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args = {}) {
    server_ = std::make_unique<ServerProcess>();
    args.insert(args.end(), {"--threads", "1", "--parallel", "1", "--ctx-size", "512"});
    std::string error;
    ASSERT_TRUE(server_->Start(args, {{"MATRICXON_MODELS_DIR", dir_ + "/models"}},
                               dir_ + "/server.log", &error))
        << error;
  }
  void MakeModelWithTemplate(const std::string& name, const std::string& text) {
    const std::string tmpl = dir_ + "/" + name + ".jinja";
    std::ofstream(tmpl) << text;
    const std::string cmd = BinaryPath() + " make-model --quiet --out " + dir_ + "/models/" + name +
                            ".gguf --chat-template " + tmpl;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  int port() const { return server_->port(); }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

// Finding: NAME.mmproj / mmproj-NAME named a vision projector, and the
// server unloaded an idle model to load the projector as a model.
TEST_F(HostileLoadServerTest, AProjectorIsNoModelAndAskingForOneUnloadsNothing) {
  const std::string ref = std::string(MATRICXON_REF_DIR) + "/models/";
  fs::copy_file(ref + "tiny-qwen35.gguf", dir_ + "/models/tiny.gguf");
  fs::copy_file(ref + "tiny-qwen35-mmproj.gguf", dir_ + "/models/tiny.mmproj.gguf");
  fs::copy_file(ref + "tiny-qwen35-mmproj.gguf", dir_ + "/models/mmproj-tiny.gguf");
  Start({"--max-loaded-models", "1"});
  ASSERT_EQ(Post(port(), "/api/models/tiny/load", "").status, 200);
  for (const std::string name : {"tiny.mmproj", "mmproj-tiny"}) {
    Reply r = Post(port(), "/v1/chat/completions", ChatBody(name), {}, 30);
    EXPECT_EQ(r.status, 404) << name << ": " << r.raw;
    EXPECT_NE(r.raw.find("does not exist"), std::string::npos) << r.raw;
    EXPECT_EQ(Post(port(), "/api/models/" + name + "/load", "", {}, 30).status, 404) << name;
  }
  Reply models = Get(port(), "/api/models");
  ASSERT_EQ(models.status, 200);
  ASSERT_EQ(models.body["models"].size(), 1u) << models.raw;
  EXPECT_EQ(models.body["models"][0]["name"], "tiny");
  EXPECT_TRUE(models.body["models"][0]["loaded"].get<bool>()) << models.raw;
  const std::string log = server_->Log();
  EXPECT_EQ(log.find("unloading model tiny"), std::string::npos) << log;
  EXPECT_EQ(log.find("unloaded model tiny"), std::string::npos) << log;
}

// Finding: 100 000 chat_template_kwargs keys (a 1.7 MB body) cost 21-69 s of
// CPU in a quadratic merge. Now a clear 400 naming the limit, and a body at
// the limit renders at once.
TEST_F(HostileLoadServerTest, HugeChatTemplateKwargsAreRefusedCheaply) {
  MakeModelWithTemplate("tiny", "{% for m in messages %}{{ m.content }}{% endfor %}{{ last_key }}");
  Start();
  ASSERT_EQ(Post(port(), "/api/models/tiny/load", "").status, 200);
  auto body_with_keys = [](int n) {
    Json kwargs = Json::object();
    for (int i = 0; i < n; ++i) kwargs["key_" + std::to_string(i)] = i;
    kwargs["last_key"] = "LAST";
    Json body = Json::parse(ChatBody("tiny"));
    body["chat_template_kwargs"] = kwargs;
    return body.dump();
  };
  const std::string huge = body_with_keys(100000);
  ASSERT_GT(huge.size(), 1500000u);
  const double cpu0 = CpuSeconds(server_->pid());
  const auto t0 = Clock::now();
  Reply r = Post(port(), "/v1/chat/completions", huge, {}, 60);
  const double wall = SecondsSince(t0);
  const double cpu = CpuSeconds(server_->pid()) - cpu0;
  std::printf("100 000 kwargs (%zu bytes): status %d in %.2f s wall, %.2f s CPU\n", huge.size(),
              r.status, wall, cpu);
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 500);
  EXPECT_NE(r.raw.find("chat_template_kwargs"), std::string::npos) << r.raw.substr(0, 500);
  EXPECT_NE(r.raw.find("1024"), std::string::npos) << r.raw.substr(0, 500);
  EXPECT_LT(cpu, 10.0);
  // At the limit: rendered, the last key (a variable of the template) printed.
  Reply ok = Post(port(), "/apply-template", body_with_keys(1023), {}, 30);
  ASSERT_EQ(ok.status, 200) << ok.raw.substr(0, 500);
  EXPECT_EQ(ok.body["prompt"], "hiLAST");
}

// Finding: a template whose string operations were not charged to the step
// budget never finished loading, and no other model could load meanwhile.
TEST_F(HostileLoadServerTest, AStringHeavyTemplateIsRefusedWithoutBlockingOtherLoads) {
  MakeModelWithTemplate("hostile", kStringHeavyTemplate);
  ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  Start({"--max-loaded-models", "2"});
  const auto t0 = Clock::now();
  auto hostile = std::async(std::launch::async, [this] {
    return Post(port(), "/apply-template", ChatBody("hostile"), {}, 30);
  });
  ASSERT_TRUE(WaitUntil([&] { return server_->Log().find("loading model hostile") != std::string::npos; }));
  // Another model loads (and answers) while the hostile one is loading.
  const auto t1 = Clock::now();
  Reply other = Post(port(), "/apply-template", ChatBody("tiny"), {}, 15);
  EXPECT_EQ(other.status, 200) << other.raw;
  EXPECT_LT(SecondsSince(t1), 15.0);
  Reply r = hostile.get();
  const double hostile_s = SecondsSince(t0);
  std::printf("hostile template model: status %d after %.2f s\n", r.status, hostile_s);
  // The template is refused at load (it exceeds the budget on a one-message
  // chat): the model serves with the built-in ChatML template.
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_LT(hostile_s, 20.0);
  const std::string log = server_->Log();
  EXPECT_NE(log.find("tokenizer.chat_template is refused"), std::string::npos) << log;
  EXPECT_NE(log.find("max_steps"), std::string::npos) << log;
}

// Finding: SIGTERM during such a load did not stop the server within 90 s.
TEST_F(HostileLoadServerTest, SigtermDuringALongLoadExitsPromptly) {
  MakeModelWithTemplate("hostile", kStringHeavyTemplate);
  Start();
  auto hostile = std::async(std::launch::async, [this] {
    return Post(port(), "/v1/chat/completions", ChatBody("hostile"), {}, 60);
  });
  ASSERT_TRUE(WaitUntil([&] { return server_->Log().find("loading model hostile") != std::string::npos; }));
  const auto t0 = Clock::now();
  kill(server_->pid(), SIGTERM);
  int status = 0;
  const bool exited = server_->WaitExit(20000, &status);
  std::printf("SIGTERM during the load: %s after %.2f s\n", exited ? "exited" : "still running",
              SecondsSince(t0));
  EXPECT_TRUE(exited) << server_->Log();
  if (exited) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  server_.reset();  // kills it when it did not exit
  hostile.wait();
}

// Finding: a valid small model followed by a 10 GB hole loaded in 41 s (the
// whole file was hashed for the saved caches) and blocked every other load.
TEST_F(HostileLoadServerTest, AFileLongerThanItsTensorsIsRefusedAtOnce) {
  ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  fs::copy_file(dir_ + "/models/tiny.gguf", dir_ + "/models/sparse.gguf");
  const uint64_t real_size = fs::file_size(dir_ + "/models/sparse.gguf");
  fs::resize_file(dir_ + "/models/sparse.gguf", real_size + (uint64_t{10} << 30));  // a hole
  Start();
  const auto t0 = Clock::now();
  auto sparse = std::async(std::launch::async, [this] {
    return Post(port(), "/v1/chat/completions", ChatBody("sparse"), {}, 60);
  });
  ASSERT_TRUE(WaitUntil([&] { return server_->Log().find("loading model sparse") != std::string::npos; }));
  const auto t1 = Clock::now();
  Reply other = Post(port(), "/apply-template", ChatBody("tiny"), {}, 15);
  EXPECT_EQ(other.status, 200) << other.raw;
  EXPECT_LT(SecondsSince(t1), 15.0);
  Reply r = sparse.get();
  const double sparse_s = SecondsSince(t0);
  std::printf("model with a 10 GB tail: status %d after %.2f s\n", r.status, sparse_s);
  EXPECT_NE(r.status, 200) << r.raw;
  EXPECT_NE(r.status, 0) << "no answer";
  EXPECT_LT(sparse_s, 10.0);
  const std::string want = "the file is " + std::to_string(real_size + (uint64_t{10} << 30)) +
                           " bytes, but its header and tensors end at byte " +
                           std::to_string(real_size);
  EXPECT_NE(r.raw.find(want), std::string::npos) << r.raw;
}

}  // namespace
}  // namespace mx::testing
