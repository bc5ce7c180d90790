// Where a hybrid model's state keeps snapshots of its recurrent layers
// (SPEC §3), as a pure function over plain values (STYLE rule 9).
//
// A recurrent state exists only at its last position. A later prompt that
// leaves a cached chat at position d (the next turn, a regenerated reply, an
// edited message, another chat with the same notes) restarts from the newest
// snapshot at or before d and re-reads the rest. Snapshots cost memory (one
// whole recurrent state each: `snapshot_bytes`, docs/cache_policy.md gives
// the formula), so a state keeps only a few, chosen for where prompts
// diverge:
//   1. one token before the prompt's end (a regenerated reply restarts there);
//   2. where the reply's own message begins (the generation prompt's marker):
//      a template that rewrites past replies (Qwen 3.5 drops their think
//      blocks) makes the next turn leave the chat right after it;
//   3. the start of the prompt's last message (an edited last message);
//   4. where this prompt left the cached chat it came from (the next edit or
//      regeneration at the same place, and the other branch of the chat);
//   5. the end of the first message (the system prompt or notes that other
//      chats share);
//   6. the other message starts, newest first;
//   7. every `every` tokens (and any other position), newest first.
// When a state would hold more than its limit (a count, and a byte budget
// per state), the least useful go first in that order: message boundaries
// outlive periodic snapshots, whatever their age. Snapshots a state already
// holds and new ones compete by the same rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mx::cache {

// What is known when a request starts reading its prompt into a state.
struct SnapshotRequest {
  int64_t prompt_len = 0;  // tokens in the prompt
  int64_t n_reused = 0;    // of them already held by the state: reading starts here
  // Complete snapshots the state holds now (positions, any order).
  std::span<const int64_t> existing = {};
  // Where the prompt's messages begin (token positions, ascending), when the
  // request came from a chat; empty when unknown.
  std::span<const int64_t> message_starts = {};
  // Where the reply's own message begins (the generation prompt's marker,
  // after the last message start); 0 when the prompt has none or unknown.
  int64_t reply_start = 0;
  // Where the prompt left the cached chat it continues (the longest common
  // prefix with it); 0 when none or unknown.
  int64_t diverged_at = 0;
};

struct SnapshotLimits {
  int64_t every = 256;          // periodic spacing, tokens (0: none)
  size_t max_count = 8;         // most snapshots per state
  uint64_t budget_bytes = 0;    // most bytes of snapshots per state
  uint64_t snapshot_bytes = 0;  // bytes of one snapshot (the whole recurrent state)
  // How many snapshots a state may hold: max_count, fewer when the budget
  // does not fit them (0 when it fits none, or snapshot_bytes is 0).
  size_t Count() const;
};

// Why a position is worth a snapshot; lower values are more useful.
enum class SnapshotKind {
  kBeforeEnd = 0,
  kReplyStart = 1,
  kLastMessage = 2,
  kDivergence = 3,
  kFirstMessage = 4,
  kMessage = 5,
  kPeriodic = 6,  // every N tokens, or a position nothing above explains
};

// The most useful kind `pos` has for this request.
SnapshotKind ClassifySnapshot(int64_t pos, const SnapshotRequest& request);

struct SnapshotChoice {
  std::vector<int64_t> drop;  // existing snapshots to drop, ascending
  std::vector<int64_t> take;  // new positions to snapshot, ascending, in (n_reused, prompt_len)
  std::vector<int64_t> keep;  // existing snapshots kept, ascending
};

// The snapshots the state should hold once the prompt is read: the most
// useful Count() of the existing ones and the candidates in the part still
// to read, ranked by kind, then newest first.
SnapshotChoice PlanSnapshots(const SnapshotRequest& request, const SnapshotLimits& limits);

}  // namespace mx::cache
