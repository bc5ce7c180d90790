// Prompt-cache policy as pure functions over plain structs (STYLE rule 9):
// which cached conversation a new prompt continues from, and which entries
// leave the RAM pool when it is over its limits. No locks, no clocks, no
// states: the pool and the engine apply the plans these functions return.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mx::cache {

// What the pool knows of one entry when planning.
struct EntryInfo {
  uint64_t id = 0;
  std::span<const int32_t> tokens;  // tokens whose state the entry holds
  int64_t prompt_len = 0;           // how many of them came from a prompt; the rest were generated
  size_t bytes = 0;                 // the state's exact size
  uint64_t last_used = 0;           // larger = more recent
  bool in_use = false;              // a request is reading or extending it now
  // Recurrent (hybrid) states: positions of their snapshots, where the state
  // can be cut or copied besides its end.
  std::span<const int64_t> cut_points = {};
};

enum class ReuseKind {
  kNone,             // start from an empty state
  kInPlace,          // continue the entry itself: all its tokens start the prompt
  kTruncateInPlace,  // the same chat again (its last reply differs): cut, then continue it
  kCopyPrefix,       // copy the shared start into a new entry; the original stays
  kShiftInPlace,     // context shift: remove the span the client trimmed, then continue
};
const char* ReuseKindName(ReuseKind kind);

struct LookupOptions {
  // The state is recurrent: it exists at its end and at its snapshots
  // (EntryInfo::cut_points) only, so a prompt restarts from the newest of
  // those at or before the shared start.
  bool recurrent = false;
  // Reuse an entry whose chat the client trimmed (SPEC §4,
  // MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT). Never for recurrent states.
  bool context_shift = true;
  // A shift must keep at least this many tokens after the dropped span.
  int64_t min_shift_kept = 16;
};

// Context shift (SPEC §4): the client dropped old messages, so the prompt is
// the entry's tokens with one span [drop_begin, drop_end) removed after the
// common start, followed by new tokens. Applying it removes the span from the
// state, moves the later positions down (re-rotating their keys) and reuses
// drop_begin + kept tokens.
struct ShiftPlan {
  int64_t drop_begin = 0;  // = the common start with the entry
  int64_t drop_end = 0;    // first entry token kept after the span
  int64_t kept = 0;        // entry tokens from drop_end on that the prompt continues with
  int64_t reused() const { return drop_begin + kept; }
};

// Finds the removed span that lets `prompt` reuse the most of `entry`, when at
// least `min_kept` tokens after the span still match (smaller gains are not
// worth a shift). nullopt when the prompt is no such trim of the entry, and
// for entries holding picture rows (negative tokens): their positions are
// not their row numbers, so a shift cannot re-rotate them.
std::optional<ShiftPlan> PlanShift(std::span<const int32_t> entry, std::span<const int32_t> prompt,
                                   int64_t min_kept = 16);

// Whether `plan` is a trim its client made, for an entry whose first
// `entry_prompt_len` tokens came from its last prompt: a client that trimmed
// its chat keeps its latest messages, so the kept span reaches the end of
// that prompt (and usually into the reply the entry generated). A prompt
// that matches only a stretch in the middle of the entry is another chat
// (e.g. a new chat whose first message is an earlier message of this one)
// and must not take this chat's state.
bool KeepsTheLatestMessages(const ShiftPlan& plan, int64_t entry_prompt_len);

struct LookupPlan {
  ReuseKind kind = ReuseKind::kNone;
  uint64_t entry_id = 0;  // the entry reused or copied (kind != kNone)
  int64_t n_reuse = 0;    // prompt tokens whose state is kept
  int64_t lcp = 0;        // longest common prefix with the chosen entry (kNone: with any entry)
  int64_t entry_len = 0;  // tokens the chosen entry held before the plan
  ShiftPlan shift;        // kShiftInPlace: the span to remove
  std::string why_none;   // for kNone: the reason, worded for the log (SPEC §8)
};

// Length of the longest common prefix of a and b.
size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b);

// Picks the entry sharing the longest start with `prompt` (ties: most recently
// used) and how to continue from it. The entry is cut and continued in place
// when the prompt leaves it inside the part it generated itself (its last
// reply: a regenerated reply, or a reply whose text re-tokenizes differently)
// — that is the same chat going on. A prompt that leaves it inside its
// prompt part (another chat with the same start, an edited message) gets a
// copy of the shared start, and the entry stays whole for its own chat. At least one prompt token is always
// left to read, so that the reply has logits to start from.
LookupPlan PlanLookup(std::span<const EntryInfo> entries, std::span<const int32_t> prompt,
                      const LookupOptions& options);

struct PoolLimits {
  size_t max_entries = 4;
  size_t budget_bytes = size_t{2048} << 20;
};

// Ids of the entries to remove, least recently used first, until the pool is
// within both limits. Entries in use and `keep_id` (the entry just written,
// 0 for none) never leave, so a single conversation larger than the whole
// budget still keeps its cache.
std::vector<uint64_t> PlanEviction(std::span<const EntryInfo> entries, const PoolLimits& limits,
                                   uint64_t keep_id);

}  // namespace mx::cache
