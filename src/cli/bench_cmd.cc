// matricxon bench engine: whole-model speed on one GGUF file, measured the way
// llama.cpp's own benchmark measures it, so the two can be run side by side:
//   prompt reading: one prompt of --prompt tokens in one batch (logits for
//                   the last token only), tokens/s;
//   generation:     --gen single-token steps from an empty state (logits for
//                   every step), tokens/s.
// --depth N runs both after N tokens already in the state (llama-bench -d N):
// the cost of a chat turn's new tokens at that context. The N tokens are read
// once, untimed; each run cuts the state back to them. --depth-fill copy reads
// only the first 512 and repeats their KV rows up to N (attention over them
// costs what it costs over read ones; setting up 32k tokens takes seconds).
// --kv-type sets the KV rows' type.
// Each figure is the median of --reps runs, after one warm-up run; the
// per-run figures and the peak resident set size are printed too.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/env.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "models/model.h"
#include "models/runner.h"

namespace mx::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"model", "", "GGUF model file (required)"},
    {"threads", "2", "compute threads"},
    {"prompt", "512", "prompt tokens per prompt-reading run (0: skip)"},
    {"gen", "128", "single-token steps per generation run (0: skip)"},
    {"depth", "0", "tokens already in the state before each run (context depth)"},
    {"kv-type", "f16", "KV cache type: f16, q8_0, q4_0 or f32"},
    {"depth-fill", "compute",
     "how the depth tokens are made: compute (read them) or copy (read the first 512, "
     "repeat their KV rows; as fast to attend over, much faster to set up)"},
    {"reps", "3", "measured runs per figure (median reported)"},
    {"seed", "1", "seed of the random token ids"},
    {"quiet", "", "no progress output", true},
};

struct Figure {
  std::vector<double> tokens_per_s;  // one per run
  double Median() const {
    std::vector<double> v = tokens_per_s;
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0;
    return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
};

// Peak resident set size of this process, MiB.
double PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& id : t) id = dist(rng);
  return t;
}

// The state every run starts from: empty, or the `depth` tokens read once
// (untimed, in chunks) and cut back to before each run.
class RunState {
 public:
  // copy: only the first kCopyFrom tokens are read; the rows after them
  // repeat theirs (attention costs the same whatever the values).
  static constexpr size_t kCopyFrom = 512;
  static Result<RunState> Make(models::Runner& runner, const std::vector<int32_t>& depth,
                               bool copy) {
    RunState rs;
    rs.seq_ = runner.NewSequence();
    rs.depth_ = static_cast<int64_t>(depth.size());
    std::vector<float> logits;
    const size_t n_read = copy ? std::min(depth.size(), kCopyFrom) : depth.size();
    for (size_t i0 = 0; i0 < n_read; i0 += 512) {
      std::vector<models::BatchEntry> batch;
      for (size_t i = i0; i < n_read && i < i0 + 512; ++i)
        batch.push_back({rs.seq_.get(), depth[i], false});
      MX_RETURN_IF_ERROR(runner.Forward(batch, &logits));
    }
    if (n_read < depth.size()) {
      if (rs.seq_->has_recurrent()) {
        return Status::InvalidArgument("--depth-fill copy needs a model without recurrent layers");
      }
      models::SequenceState& seq = *rs.seq_;
      MX_RETURN_IF_ERROR(seq.Reserve(rs.depth_));
      const auto n = static_cast<int64_t>(n_read);
      for (size_t l = 0; l < seq.layout().kv_dims.size(); ++l) {
        for (int64_t p = n; p < rs.depth_; ++p) {
          std::memcpy(seq.k_row(l, p), seq.k_row(l, p % n), seq.layout().k_row_bytes(l));
          std::memcpy(seq.v_row(l, p), seq.v_row(l, p % n), seq.layout().v_row_bytes(l));
        }
      }
      seq.CommitTokens(rs.depth_);
    }
    return rs;
  }
  Result<models::SequenceState*> Reset() {
    MX_RETURN_IF_ERROR(seq_->Truncate(depth_));
    return seq_.get();
  }

 private:
  std::unique_ptr<models::SequenceState> seq_;
  int64_t depth_ = 0;
};

// One prompt-reading run: seconds for one Forward of all `tokens`.
Result<double> PromptRun(models::Runner& runner, RunState& state,
                         const std::vector<int32_t>& tokens, Env* env) {
  MX_ASSIGN_OR_RETURN(models::SequenceState * seq, state.Reset());
  std::vector<models::BatchEntry> batch;
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.push_back({seq, tokens[i], i + 1 == tokens.size()});
  }
  std::vector<float> logits;
  const uint64_t t0 = env->NowMicros();
  MX_RETURN_IF_ERROR(runner.Forward(batch, &logits));
  return static_cast<double>(env->NowMicros() - t0) * 1e-6;
}

// One generation run: seconds for tokens.size() single-token steps.
Result<double> GenRun(models::Runner& runner, RunState& state, const std::vector<int32_t>& tokens,
                      Env* env, const std::function<void(size_t)>& step_done) {
  MX_ASSIGN_OR_RETURN(models::SequenceState * seq, state.Reset());
  std::vector<float> logits;
  const uint64_t t0 = env->NowMicros();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const models::BatchEntry e{seq, tokens[i], true};
    MX_RETURN_IF_ERROR(runner.Forward({&e, 1}, &logits));
    if (step_done) step_done(i + 1);
  }
  return static_cast<double>(env->NowMicros() - t0) * 1e-6;
}

std::string FormatFigure(const Figure& f) {
  std::string runs;
  for (double v : f.tokens_per_s) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.1f", runs.empty() ? "" : ", ", v);
    runs += b;
  }
  char out[128];
  std::snprintf(out, sizeof out, "%9.1f t/s  [%s]", f.Median(), runs.c_str());
  return out;
}

Status RunEngine(const Flags& f) {
  if (f.Get("model").empty()) return Status::InvalidArgument("--model is required");
  MX_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 1, 256));
  MX_ASSIGN_OR_RETURN(int64_t n_prompt, f.GetInt("prompt", 0, 1 << 20));
  MX_ASSIGN_OR_RETURN(int64_t n_gen, f.GetInt("gen", 0, 1 << 20));
  MX_ASSIGN_OR_RETURN(int64_t depth, f.GetInt("depth", 0, 1 << 20));
  MX_ASSIGN_OR_RETURN(int64_t reps, f.GetInt("reps", 1, 1000));
  MX_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0, INT64_MAX));
  const bool quiet = f.GetBool("quiet");
  Env* env = Env::Default();

  MX_ASSIGN_OR_RETURN(auto model, models::Model::Load(env, f.Get("model")));
  models::RunnerOptions ro;
  ro.n_threads = static_cast<int>(threads);
  const std::string kv_name = f.Get("kv-type");
  if ((kv_name != "f16" && kv_name != "q8_0" && kv_name != "q4_0" && kv_name != "f32") ||
      !DTypeFromName(kv_name, &ro.kv_type)) {
    return Status::InvalidArgument("--kv-type '" + kv_name + "': expected f16, q8_0, q4_0 or f32");
  }
  ro.n_ctx = std::max<int64_t>(256, depth + std::max(n_prompt, n_gen) + 1);
  MX_ASSIGN_OR_RETURN(auto runner, models::Runner::Create(*model, ro));
  const int64_t n_vocab = runner->n_vocab();

  std::printf("model    %s (%.1f MiB of weights, %s kernels, %lld threads, %s KV)\n",
              f.Get("model").c_str(), static_cast<double>(model->weight_bytes()) / (1 << 20),
              kernels::IsaName(kernels::ActiveIsa()), static_cast<long long>(threads),
              kv_name.c_str());
  std::fflush(stdout);
  auto note = [&](const std::string& s) {
    if (!quiet) std::fprintf(stderr, "\r%-60s", s.c_str());
  };

  if (depth > 0) note("depth: reading " + std::to_string(depth) + " tokens");
  const std::string fill = f.Get("depth-fill");
  if (fill != "compute" && fill != "copy") {
    return Status::InvalidArgument("--depth-fill '" + fill + "': expected compute or copy");
  }
  MX_ASSIGN_OR_RETURN(
      RunState state,
      RunState::Make(*runner, RandomTokens(depth, n_vocab, static_cast<uint64_t>(seed) + 2),
                     fill == "copy"));
  Figure pp, tg;
  if (n_prompt > 0) {
    const std::vector<int32_t> tokens = RandomTokens(n_prompt, n_vocab, static_cast<uint64_t>(seed));
    note("prompt: warm-up");
    MX_RETURN_IF_ERROR(PromptRun(*runner, state, tokens, env).status());
    for (int64_t r = 0; r < reps; ++r) {
      note("prompt: run " + std::to_string(r + 1) + "/" + std::to_string(reps));
      MX_ASSIGN_OR_RETURN(double s, PromptRun(*runner, state, tokens, env));
      pp.tokens_per_s.push_back(static_cast<double>(n_prompt) / s);
    }
  }
  if (n_gen > 0) {
    const std::vector<int32_t> tokens = RandomTokens(n_gen, n_vocab, static_cast<uint64_t>(seed) + 1);
    note("generation: warm-up");
    const std::vector<int32_t> warm(tokens.begin(), tokens.begin() + std::min<int64_t>(n_gen, 8));
    MX_RETURN_IF_ERROR(GenRun(*runner, state, warm, env, {}).status());
    for (int64_t r = 0; r < reps; ++r) {
      const std::string label =
          "generation: run " + std::to_string(r + 1) + "/" + std::to_string(reps);
      MX_ASSIGN_OR_RETURN(double s, GenRun(*runner, state, tokens, env, [&](size_t done) {
                            if (done % 16 == 0)
                              note(label + ", token " + std::to_string(done) + "/" +
                                   std::to_string(n_gen));
                          }));
      tg.tokens_per_s.push_back(static_cast<double>(n_gen) / s);
    }
  }
  if (!quiet) std::fprintf(stderr, "\r%-60s\r", "");
  const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
  if (n_prompt > 0)
    std::printf("pp%lld%s %s\n", static_cast<long long>(n_prompt), at.c_str(),
                FormatFigure(pp).c_str());
  if (n_gen > 0)
    std::printf("tg%lld%s %s\n", static_cast<long long>(n_gen), at.c_str(),
                FormatFigure(tg).c_str());
  std::printf("peak RSS %.1f MiB\n", PeakRssMiB());
  return Status::Ok();
}

constexpr char kUsage[] =
    "usage: matricxon bench engine --model FILE [--threads 2] [--prompt 512] [--gen 128] "
    "[--depth 0] [--kv-type f16] [--reps 3]\n"
    "\n"
    "Kernel figures (GFLOP/s, GB/s against the machine's peak) come from the\n"
    "separate Google Benchmark binary bench/kernels_bench.\n";

}  // namespace

int BenchCommand(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "chat") return BenchChatCommand(argc, argv);
  if (argc >= 3 && std::string(argv[2]) == "load") return BenchLoadCommand(argc, argv);
  if (argc >= 3 && std::string(argv[2]) == "http") return BenchHttpCommand(argc, argv);
  if (argc < 3 || std::string(argv[2]) != "engine") {
    const bool help = argc >= 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h");
    std::fputs(kUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  return RunCommand("bench engine", "Measures prompt reading and generation speed (tokens/s) of a model.", kFlags,
                    argc, argv, 3, RunEngine);
}

}  // namespace mx::cli
