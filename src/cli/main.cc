// matricxon: the command-line entry point. Dispatches to a sub-command.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "version/build_info.h"

namespace {

constexpr char kUsage[] =
    "usage: matricxon <command> [flags]\n"
    "\n"
    "commands:\n"
    "  make-model   write a synthetic GGUF model of any shape (tests, benchmarks)\n"
    "  chat         chat with a model in the terminal, streaming tokens\n"
    "  serve        serve the models of a folder over an OpenAI-compatible HTTP API\n"
    "  cache        `cache ls`, `cache verify`, `cache purge`: the saved prompt caches on disk\n"
    "  version      the release, commit, build type and the kernels' CPU features (also "
    "--version)\n"
    "  bench        `bench engine`: prompt-reading and generation speed of a model;\n"
    "               `bench chat`: TTFT per turn of a growing chat, prompt cache on and off;\n"
    "               `bench load`: generation tokens/s and TTFT with 1, 4, 8 concurrent chats;\n"
    "               `bench http`: requests/s and SSE tokens/s of a running server's HTTP layer\n"
    "\n"
    "Run `matricxon <command> --help` for the flags of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "--version" || command == "-V" || command == "version") {
    std::fputs(mx::version::VersionText().c_str(), stdout);
    return 0;
  }
  if (command == "make-model") return mx::cli::MakeModelCommand(argc, argv);
  if (command == "chat") return mx::cli::ChatCommand(argc, argv);
  if (command == "serve") return mx::cli::ServeCommand(argc, argv);
  if (command == "bench") return mx::cli::BenchCommand(argc, argv);
  if (command == "cache") return mx::cli::CacheCommand(argc, argv);
  std::fprintf(stderr, "matricxon: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
