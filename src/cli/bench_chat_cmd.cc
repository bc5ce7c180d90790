// matricxon bench chat: replays a growing multi-turn chat against any
// OpenAI-compatible server (ours, llama.cpp's server, ...) and measures, per
// turn, the time to first token and how many prompt tokens came from the
// cache — once with the prompt cache on and once with it off
// ("cache_prompt": false, which llama.cpp's server also accepts). Writes a CSV
// and, when gnuplot is installed, a PNG of TTFT against turn number. When the
// server sends llama.cpp-style `timings` with its replies (Matricxon adds
// cache_ms), the CSV also holds how long reading the new tokens took and how
// long the prompt cache's own work took, so a cached turn's overhead is seen.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/percentile.h"
#include "core/env.h"

namespace mx::cli {
namespace {

using Json = nlohmann::json;

const std::vector<FlagSpec> kFlags = {
    {"url", "http://127.0.0.1:8080", "base URL of an OpenAI-compatible server"},
    {"model", "", "model name to request"},
    {"turns", "20", "turns of the chat"},
    {"system-words", "120", "words in the system prompt"},
    {"user-words", "120", "words per user message"},
    {"preset", "", "a named trace; flags given explicitly win. '4k': a 20-turn chat growing to ~4k prompt "
                   "tokens (user-words 72; the defaults grow to ~6.2k). 'hybrid': the 4k chat plus, every "
                   "3rd turn, a regenerated reply and an edited last message (where hybrid models such as "
                   "Qwen 3.5 and Nemotron-H restart from snapshots)"},
    {"regenerate-every", "0", "every N turns, ask for the last reply again (same prompt) before going on (0 = never)"},
    {"edit-every", "0", "every N turns, send the last user message with its last words changed before going on "
                        "(0 = never)"},
    {"reply-tokens", "32", "max_tokens of each reply"},
    {"modes", "on,off", "which runs: on, off or on,off (off sends cache_prompt: false)"},
    {"out", "bench-out/chat", "output path prefix: <out>.csv and <out>.png"},
    {"label", "matricxon", "name of the server in the CSV and plot"},
    {"seed", "1", "seed of the chat text"},
    {"trim-tokens", "0", "overflow scenario: before a turn whose chat passed this many prompt tokens, drop "
                         "the oldest user/assistant pair (the system prompt stays), as pAIring does (0 = never)"},
};

const char* kWords[] = {"the",   "cache", "keeps",  "every", "chat",   "state", "so",     "next",  "turn",
                        "reads", "only",  "new",    "tokens", "model", "server", "user",  "asks",  "about",
                        "notes", "long",  "history", "reply", "fast",   "time",  "first", "token", "memory",
                        "disk",  "key",   "copy",   "shared", "start", "window", "trim",  "old",   "message"};

std::string Words(std::mt19937& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    s += (i % 17 == 16) ? ". " : " ";
  }
  return s;
}

struct TurnResult {
  int turn = 0;
  std::string mode;
  std::string kind = "turn";  // turn, regenerate (the same prompt again) or edit (last message changed)
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double ttft_ms = 0, total_ms = 0;
  // From the reply's `timings`, when the server sends them (llama.cpp's
  // server has no cache_ms: then it stays negative).
  bool has_timings = false;
  int64_t prompt_n = 0;   // prompt tokens read
  double prompt_ms = 0;   // forward passes reading them
  double cache_ms = -1;   // the prompt cache's own work for the request
  std::vector<double> token_ms;  // when each streamed token arrived, from the request's start
};

// Reads a reply's `timings` object into `r` (fields it lacks stay unset).
void ReadTimings(const Json& t, TurnResult* r) {
  if (!t.is_object()) return;
  auto number = [&](const char* f) { return t.contains(f) && t[f].is_number(); };
  if (!number("prompt_n") || !number("prompt_ms")) return;
  r->has_timings = true;
  r->prompt_n = t["prompt_n"].get<int64_t>();
  r->prompt_ms = t["prompt_ms"].get<double>();
  if (number("cache_ms")) r->cache_ms = t["cache_ms"].get<double>();
}

// The cache's share of reading the new tokens, in percent (< 0: unknown).
double CachePercent(const TurnResult& r) {
  if (!r.has_timings || r.cache_ms < 0 || r.prompt_ms <= 0) return -1;
  return 100.0 * r.cache_ms / r.prompt_ms;
}

struct Target {
  std::string host;
  int port = 0;
};

Result<Target> ParseUrl(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.rfind("https://", 0) == 0) return Status::InvalidArgument("--url: https is not supported");
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return Target{rest, 80};
  auto port = ParseInt("--url port", rest.substr(colon + 1), 1, 65535);
  if (!port.ok()) return port.status();
  return Target{rest.substr(0, colon), static_cast<int>(*port)};
}

// One streamed chat completion; fills TTFT, usage and the reply text.
Status RunTurn(const Target& t, const Json& body, TurnResult* r, std::string* reply) {
  httplib::Client cli(t.host, t.port);
  cli.set_read_timeout(600, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string buffer, raw;
  bool first = false;
  Status parse_error;
  const auto t0 = std::chrono::steady_clock::now();
  auto ms_since = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    if (raw.size() < 4096) raw.append(data, std::min<size_t>(len, 4096));
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.rfind("data: ", 0) != 0) continue;
      std::string payload = line.substr(6);
      if (payload == "[DONE]") continue;
      Json ev = Json::parse(payload, nullptr, false);
      if (ev.is_discarded()) {
        parse_error = Status::Corruption("unparseable event: " + payload.substr(0, 200));
        return false;
      }
      if (ev.contains("choices") && !ev["choices"].empty()) {
        const Json& choice = ev["choices"][0];
        // The first token is the first chunk with text or with a token's
        // logprobs: tokens whose text is empty (or held back) still carry
        // their logprobs, and a role-only chunk sent early carries neither.
        const Json* lp = choice.contains("logprobs") ? &choice["logprobs"] : nullptr;
        const bool has_token = lp != nullptr && lp->is_object() && lp->contains("content") &&
                               (*lp)["content"].is_array() && !(*lp)["content"].empty();
        std::string text;
        if (choice.contains("delta") && choice["delta"].contains("content") &&
            choice["delta"]["content"].is_string()) {
          text = choice["delta"]["content"].get<std::string>();
        }
        if (!text.empty() || has_token) r->token_ms.push_back(ms_since());
        if (!first && (!text.empty() || has_token)) {
          first = true;
          r->ttft_ms = r->token_ms.back();
        }
        *reply += text;
      }
      if (ev.contains("timings")) ReadTimings(ev["timings"], r);
      if (ev.contains("usage") && ev["usage"].is_object()) {
        const Json& u = ev["usage"];
        r->prompt_tokens = u.value("prompt_tokens", int64_t{0});
        r->completion_tokens = u.value("completion_tokens", int64_t{0});
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
          r->cached_tokens = u["prompt_tokens_details"].value("cached_tokens", int64_t{0});
        }
      }
    }
    return true;
  };
  auto res = cli.send(req);
  if (!parse_error.ok()) return parse_error;
  if (!res) return Status::IOError("request to " + t.host + ":" + std::to_string(t.port) + " failed: " + httplib::to_string(res.error()));
  if (res->status != 200) {
    return Status::IOError("HTTP " + std::to_string(res->status) + ": " + (raw.empty() ? res->body : raw).substr(0, 300));
  }
  r->total_ms = ms_since();
  if (!first) r->ttft_ms = r->total_ms;  // the reply was empty
  return Status::Ok();
}

Status WritePlot(const std::string& out, const std::string& label) {
  const std::string script = out + ".gnuplot";
  std::ofstream g(script);
  g << "set terminal png size 900,540\n"
    << "set termoption noenhanced\n"
    << "set output '" << out << ".png'\n"
    << "set title 'Time to first token per turn (" << label << ")'\n"
    << "set xlabel 'turn'\nset ylabel 'TTFT (ms)'\nset grid\nset key left top\n"
    << "set datafile separator ','\n"
    << "turn(k) = strcol(12) eq k\n"
    << "plot '" << out << ".csv' using 2:($3 == 1 && turn('turn') ? $7 : 1/0) with linespoints title 'cache on', \\\n"
    << "     '" << out << ".csv' using 2:($3 == 0 && turn('turn') ? $7 : 1/0) with linespoints title 'cache off', \\\n"
    << "     '" << out << ".csv' using 2:($3 == 1 && turn('regenerate') ? $7 : 1/0) with points title 'regenerate, cache on', \\\n"
    << "     '" << out << ".csv' using 2:($3 == 1 && turn('edit') ? $7 : 1/0) with points title 'edit, cache on'\n";
  g.close();
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return Status::NotSupported("gnuplot is not installed; no PNG written (" + script + " is ready)");
  }
  if (std::system(("gnuplot " + script).c_str()) != 0) return Status::IOError("gnuplot failed on " + script);
  return Status::Ok();
}

Status Run(const Flags& f) {
  MX_ASSIGN_OR_RETURN(Target target, ParseUrl(f.Get("url")));
  MX_ASSIGN_OR_RETURN(int64_t turns, f.GetInt("turns", 1, 1000));
  MX_ASSIGN_OR_RETURN(int64_t system_words, f.GetInt("system-words", 0, 100000));
  MX_ASSIGN_OR_RETURN(int64_t user_words, f.GetInt("user-words", 1, 100000));
  MX_ASSIGN_OR_RETURN(int64_t regenerate_every, f.GetInt("regenerate-every", 0, 1000));
  MX_ASSIGN_OR_RETURN(int64_t edit_every, f.GetInt("edit-every", 0, 1000));
  if (f.Get("preset") == "4k" || f.Get("preset") == "hybrid") {
    // Measured with make-model --preset smollm2-135m: 120 + 20 x 72 words (32-token
    // replies) reach ~4k prompt tokens at turn 20.
    if (!f.Has("user-words")) user_words = 72;
    if (f.Get("preset") == "hybrid") {
      if (!f.Has("regenerate-every")) regenerate_every = 3;
      if (!f.Has("edit-every")) edit_every = 3;
    }
  } else if (!f.Get("preset").empty()) {
    return Status::InvalidArgument("--preset: expected 4k or hybrid, got '" + f.Get("preset") + "'");
  }
  MX_ASSIGN_OR_RETURN(int64_t reply_tokens, f.GetInt("reply-tokens", 1, 100000));
  MX_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0, INT64_MAX));
  MX_ASSIGN_OR_RETURN(int64_t trim_tokens, f.GetInt("trim-tokens", 0, int64_t{1} << 30));
  std::vector<std::string> modes;
  for (const std::string m : {"on", "off"}) {
    if (f.Get("modes").find(m) != std::string::npos) modes.push_back(m);
  }
  if (modes.empty()) return Status::InvalidArgument("--modes: expected on, off or on,off");
  const std::string out = f.Get("out");
  if (size_t slash = out.rfind('/'); slash != std::string::npos) {
    MX_RETURN_IF_ERROR(Env::Default()->CreateDirs(out.substr(0, slash)));
  }

  std::vector<TurnResult> results;
  for (const std::string& mode : modes) {
    std::mt19937 rng(static_cast<uint32_t>(seed));  // the same chat text in every mode
    Json messages = Json::array();
    if (system_words > 0) messages.push_back({{"role", "system"}, {"content", Words(rng, static_cast<int>(system_words))}});
    double sum_ttft = 0;
    int64_t last_prompt_tokens = 0;
    double sum_percent = 0, max_percent = -1;
    int n_percent = 0;
    for (int turn = 1; turn <= turns; ++turn) {
      // The client trims the oldest exchange once the chat outgrew its window.
      int trimmed = 0;
      const size_t first = system_words > 0 ? 1 : 0;
      if (trim_tokens > 0 && last_prompt_tokens > trim_tokens && messages.size() >= first + 2) {
        messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first),
                       messages.begin() + static_cast<std::ptrdiff_t>(first + 2));
        trimmed = 2;
      }
      messages.push_back({{"role", "user"}, {"content", Words(rng, static_cast<int>(user_words))}});
      // ignore_eos: every reply has exactly reply-tokens tokens, so turns are comparable.
      // logprobs: every token's chunk is marked, so the first token is seen
      // even when its text is empty.
      Json body = {{"messages", messages},     {"max_tokens", reply_tokens}, {"temperature", 0},
                   {"stream", true},           {"cache_prompt", mode == "on"},
                   {"ignore_eos", true},       {"stream_options", {{"include_usage", true}}},
                   {"logprobs", true}};
      if (!f.Get("model").empty()) body["model"] = f.Get("model");
      // Side requests before the turn proper (their replies are dropped, the
      // chat goes on as if they had not happened): the same prompt again, as
      // a "regenerate" button sends it, and the last message edited.
      auto probe = [&](const char* kind, const Json& probe_body) -> Status {
        TurnResult p;
        p.turn = turn;
        p.mode = mode;
        p.kind = kind;
        std::string ignored;
        MX_RETURN_IF_ERROR(RunTurn(target, probe_body, &p, &ignored)
                               .WithContext(std::string(kind) + " at turn " + std::to_string(turn)));
        std::fprintf(stderr, "[cache %-3s] turn %2d %-10s: prompt %6lld tokens, cached %6lld, TTFT %9.1f ms\n",
                     mode.c_str(), turn, kind, static_cast<long long>(p.prompt_tokens),
                     static_cast<long long>(p.cached_tokens), p.ttft_ms);
        results.push_back(p);
        return Status::Ok();
      };
      TurnResult r;
      r.turn = turn;
      r.mode = mode;
      std::string reply;
      MX_RETURN_IF_ERROR(RunTurn(target, body, &r, &reply).WithContext("turn " + std::to_string(turn)));
      if (regenerate_every > 0 && turn % regenerate_every == 0) {
        MX_RETURN_IF_ERROR(probe("regenerate", body));
      }
      if (edit_every > 0 && turn % edit_every == 0) {
        Json edited = body;
        std::string& text = edited["messages"].back()["content"].get_ref<std::string&>();
        const size_t cut = text.size() > 40 ? text.size() - 40 : 0;
        text = text.substr(0, cut) + Words(rng, 6);
        MX_RETURN_IF_ERROR(probe("edit", edited));
      }
      messages.push_back({{"role", "assistant"}, {"content", reply}});
      last_prompt_tokens = r.prompt_tokens + r.completion_tokens;
      sum_ttft += r.ttft_ms;
      std::string timings;
      if (r.has_timings) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), ", read %5lld in %9.1f ms", static_cast<long long>(r.prompt_n), r.prompt_ms);
        timings = buf;
        if (const double pct = CachePercent(r); pct >= 0) {
          std::snprintf(buf, sizeof(buf), ", cache %8.3f ms (cache_ms/prompt_ms %.3g %%)", r.cache_ms, pct);
          timings += buf;
          // Turns that reused a cached chat are the ones the < 5 % target is about.
          if (r.cached_tokens > 0) {
            sum_percent += pct;
            max_percent = std::max(max_percent, pct);
            ++n_percent;
          }
        }
      }
      std::fprintf(stderr,
                   "[cache %-3s] turn %2d: prompt %6lld tokens, cached %6lld, TTFT %9.1f ms, total %9.1f ms%s%s\n",
                   mode.c_str(), turn, static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.cached_tokens),
                   r.ttft_ms, r.total_ms, timings.c_str(), trimmed ? "  (oldest exchange trimmed)" : "");
      results.push_back(r);
    }
    std::fprintf(stderr, "[cache %-3s] total TTFT over %lld turns: %.1f ms\n", mode.c_str(),
                 static_cast<long long>(turns), sum_ttft);
    if (n_percent > 0) {
      std::fprintf(stderr, "[cache %-3s] cache_ms/prompt_ms over %d cached turns: mean %.3g %%, max %.3g %%\n",
                   mode.c_str(), n_percent, sum_percent / n_percent, max_percent);
    }
  }

  std::string label = f.Get("label");  // a CSV field: no commas, no quotes
  for (char& ch : label) {
    if (ch == ',' || ch == '"') ch = ';';
  }
  std::ofstream csv(out + ".csv");
  // The timing columns come last (the plot reads columns 2, 3 and 7) and are
  // empty when the server sent no timings.
  csv << "label,turn,cache_on,prompt_tokens,cached_tokens,completion_tokens,ttft_ms,total_ms,prompt_n,prompt_ms,"
         "cache_ms,kind\n";
  for (const auto& r : results) {
    csv << label << "," << r.turn << "," << (r.mode == "on" ? 1 : 0) << "," << r.prompt_tokens << ","
        << r.cached_tokens << "," << r.completion_tokens << "," << r.ttft_ms << "," << r.total_ms << ",";
    if (r.has_timings) {
      csv << r.prompt_n << "," << r.prompt_ms << ",";
      if (r.cache_ms >= 0) csv << r.cache_ms;
    } else {
      csv << ",,";
    }
    csv << "," << r.kind << "\n";
  }
  csv.close();
  std::fprintf(stderr, "wrote %s.csv\n", out.c_str());
  Status plot = WritePlot(out, f.Get("label"));
  if (plot.ok()) {
    std::fprintf(stderr, "wrote %s.png\n", out.c_str());
  } else {
    std::fprintf(stderr, "%s\n", plot.message().c_str());
  }
  return Status::Ok();
}

const std::vector<FlagSpec> kLoadFlags = {
    {"url", "http://127.0.0.1:8080", "base URL of an OpenAI-compatible server"},
    {"model", "", "model name to request"},
    {"clients", "1,4,8", "concurrent chats to measure, comma-separated"},
    {"prompt-words", "60", "words in each chat's prompt"},
    {"reply-tokens", "64", "max_tokens of each reply"},
    {"requests", "2", "requests each client sends in a row"},
    {"cache", "false", "true: each client's requests are the turns of one growing chat with the prompt cache on "
                       "(chats leave a small pool and are saved while others reply); false: fresh prompts, cache off"},
};

// N clients at once, each sending `requests` chats in a row (different
// prompts, cache off so every request reads its prompt; or, with --cache,
// the turns of one growing chat each): aggregate generated tokens/s, mean
// time to first token, and the p50 / p99 time between streamed tokens.
Status RunLoad(const Flags& f) {
  MX_ASSIGN_OR_RETURN(Target target, ParseUrl(f.Get("url")));
  MX_ASSIGN_OR_RETURN(int64_t words, f.GetInt("prompt-words", 1, 100000));
  MX_ASSIGN_OR_RETURN(int64_t reply_tokens, f.GetInt("reply-tokens", 1, 100000));
  MX_ASSIGN_OR_RETURN(int64_t requests, f.GetInt("requests", 1, 1000));
  std::vector<int64_t> levels;
  std::string list = f.Get("clients");
  for (size_t pos = 0; pos <= list.size();) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    MX_ASSIGN_OR_RETURN(int64_t n, ParseInt("--clients", list.substr(pos, comma - pos), 1, 256));
    levels.push_back(n);
    pos = comma + 1;
  }
  const bool use_cache = f.GetBool("cache");
  std::printf("%8s %10s %14s %14s %12s %12s %12s\n", "clients", "requests", "gen tokens", "tokens/s",
              "mean TTFT ms", "p50 gap ms", "p99 gap ms");
  for (int64_t n : levels) {
    std::vector<std::vector<TurnResult>> per_client(static_cast<size_t>(n));
    std::vector<Status> errors(static_cast<size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int64_t c = 0; c < n; ++c) {
      threads.emplace_back([&, c] {
        std::mt19937 rng(static_cast<uint32_t>(1000 * n + c));
        Json messages = Json::array();
        for (int64_t r = 0; r < requests; ++r) {
          if (!use_cache) messages = Json::array();
          messages.push_back({{"role", "user"}, {"content", Words(rng, static_cast<int>(words))}});
          Json body = {{"messages", messages},
                       {"max_tokens", reply_tokens}, {"temperature", 0}, {"stream", true},
                       {"cache_prompt", use_cache}, {"ignore_eos", true}, {"logprobs", true},
                       {"stream_options", {{"include_usage", true}}}};
          if (!f.Get("model").empty()) body["model"] = f.Get("model");
          TurnResult tr;
          std::string reply;
          Status st = RunTurn(target, body, &tr, &reply);
          if (!st.ok()) {
            errors[static_cast<size_t>(c)] = st;
            return;
          }
          per_client[static_cast<size_t>(c)].push_back(tr);
          messages.push_back({{"role", "assistant"}, {"content", reply}});
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const Status& st : errors) MX_RETURN_IF_ERROR(st);
    int64_t generated = 0, count = 0;
    double ttft = 0;
    std::vector<double> gaps;
    for (const auto& v : per_client) {
      for (const auto& r : v) {
        generated += r.completion_tokens;
        ttft += r.ttft_ms;
        ++count;
        for (size_t i = 1; i < r.token_ms.size(); ++i) gaps.push_back(r.token_ms[i] - r.token_ms[i - 1]);
      }
    }
    std::printf("%8lld %10lld %14lld %14.1f %12.1f %12.2f %12.2f\n", static_cast<long long>(n),
                static_cast<long long>(count), static_cast<long long>(generated),
                static_cast<double>(generated) / seconds, count > 0 ? ttft / static_cast<double>(count) : 0.0,
                Percentile(gaps, 0.5), Percentile(gaps, 0.99));
    std::fflush(stdout);
  }
  return Status::Ok();
}

}  // namespace

int BenchLoadCommand(int argc, char** argv) {
  return RunCommand("bench load", "Concurrent chats against an OpenAI-compatible server: aggregate generation "
                            "tokens/s and mean time to first token per concurrency level.", kLoadFlags, argc, argv, 3, RunLoad);
}

int BenchChatCommand(int argc, char** argv) {
  return RunCommand("bench chat", "Replays a growing multi-turn chat against an OpenAI-compatible server, with the "
                            "prompt cache on and off, and reports time to first token per turn (CSV + PNG).", kFlags, argc, argv, 3, Run);
}

}  // namespace mx::cli
