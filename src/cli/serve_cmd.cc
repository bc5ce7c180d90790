// matricxon serve: the HTTP server. Settings come from the environment
// (SPEC §9) or the matching flags, all read by server::LoadServerOptions.
// SIGINT/SIGTERM: stop accepting, finish the replies in flight, unload the
// models (shutdown hooks), exit 0. SIGHUP: re-read the API keys file (the
// keys in force stay when the new file is refused).
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/env.h"
#include "core/logging.h"
#include "server/options.h"
#include "server/server.h"
#include "version/build_info.h"

namespace mx::cli {
namespace {

std::vector<FlagSpec> ServeFlags() {
  std::vector<FlagSpec> flags;
  for (const auto& s : server::ServerSettings()) {
    flags.push_back({s.flag, "", s.help + " [" + s.env + ", default " + s.default_text + "]"});
  }
  flags.push_back({"verbose", "", "debug log lines", true});
  return flags;
}

}  // namespace

int ServeCommand(int argc, char** argv) {
  const std::vector<FlagSpec> specs = ServeFlags();
  auto flags = Flags::Parse(specs, argc, argv, 2);
  if (!flags.ok()) {
    std::fprintf(stderr, "matricxon serve: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::fputs(Flags::Usage("serve", "Serves the GGUF models of a folder over an OpenAI-compatible HTTP API.",
                            specs).c_str(), stdout);
    return 0;
  }
  if (flags->GetBool("verbose")) SetLogLevel(LogLevel::kDebug);
  std::map<std::string, std::string> given;
  for (const auto& s : server::ServerSettings()) {
    if (flags->Has(s.flag)) given[s.flag] = flags->Get(s.flag);
  }
  auto options = server::LoadServerOptions(given, [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
  if (!options.ok()) {
    std::fprintf(stderr, "matricxon serve: %s\n", options.status().message().c_str());
    return 2;
  }

  // Signals are taken by one thread (sigwait), so block them before any
  // other thread exists; a client closing its socket must not kill us.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Room for the connections the HTTP front allows (its own limits apply).
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  const version::KernelInfo kernels = version::Kernels();
  MX_LOG(kInfo) << version::OneLine() << ", kernels " << kernels.path;
  server::HttpServer server(*options, Env::Default());
  Status st = server.Bind();
  if (!st.ok()) {
    std::fprintf(stderr, "matricxon serve: %s\n", st.ToString().c_str());
    return 1;
  }
  // The reload runs on this thread, not in a signal handler.
  std::thread signals([&server, set] {
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) (void)server.ReloadApiKeys();
    MX_LOG(kInfo) << "received " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down";
    server.Stop();
  });
  server.Run();
  // Run() returned: either a signal stopped it, or listening failed. Wake the
  // signal thread if it is still waiting.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  MX_LOG(kInfo) << "bye";
  return 0;
}

}  // namespace mx::cli
