// The stream driver: finds markers, holds back what could still start one,
// and runs the format's block parser on the text from a marker on (the
// contract is in formats.h). ParseToolCalls is this driver run over the whole
// text.
#include <algorithm>
#include <cstring>

#include "toolcalls/formats.h"
#include "toolcalls/tool_calls.h"

namespace mx::toolcalls {

using internal::Block;
using internal::BlockStatus;
using internal::FormatSpec;
using internal::IsJsonSpace;
using internal::TextMode;

namespace {

// A block is tried again only when this much text arrived since the last try,
// or the new text has a byte that can end a block, or the block is short.
constexpr size_t kShortBlockBytes = 512;

size_t FirstNonSpace(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsJsonSpace(s[i])) return i;
  }
  return std::string_view::npos;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

struct ToolCallStream::Impl {
  const FormatSpec& spec;
  const ToolSchemas* schemas;
  const bool parse_calls;  // false: a block with calls is text
  std::string buf;       // text not yet released
  bool pending = false;  // buf starts with a marker whose block is not decided
  size_t marker_len = 0;
  std::string held_space;   // whitespace before the pending block
  size_t last_try = 0;      // buf.size() when the pending block was last tried
  bool start = true;        // only whitespace and calls so far
  bool after_call = false;  // whitespace now is after a call: dropped
  TextMode mode = TextMode::kContent;
  int n_calls = 0;
  bool finished = false;

  Impl(ToolCallFormat format, const ToolSchemas* s, bool calls)
      : spec(internal::SpecFor(format)), schemas(s), parse_calls(calls) {}

  void Text(std::string_view text, std::vector<ToolCallEvent>* out) const {
    if (text.empty()) return;
    const auto kind = mode == TextMode::kReasoning ? ToolCallEvent::Kind::kReasoning
                                                   : ToolCallEvent::Kind::kContent;
    if (!out->empty() && out->back().kind == kind) {
      out->back().text.append(text);
      return;
    }
    ToolCallEvent e;
    e.kind = kind;
    e.text = std::string(text);
    out->push_back(std::move(e));
  }

  // Earliest complete marker in buf: {position, length}; length 0 if none.
  std::pair<size_t, size_t> FindMarker() const {
    size_t best = std::string::npos, len = 0;
    for (std::string_view m : spec.markers) {
      const size_t at = buf.find(m);
      if (at != std::string::npos && (at < best || (at == best && m.size() > len))) {
        best = at;
        len = m.size();
      }
    }
    if (start) {
      const size_t f = FirstNonSpace(buf);
      if (f != std::string_view::npos) {
        for (std::string_view m : spec.start_markers) {
          if (StartsWith(std::string_view(buf).substr(f), m) &&
              (f < best || (f == best && m.size() > len))) {
            best = f;
            len = m.size();
          }
        }
      }
    }
    return {best, len};
  }

  // How many bytes at the end of buf could begin a marker.
  size_t HoldBack() const {
    const std::string_view b(buf);
    size_t keep = 0;
    for (std::string_view m : spec.markers) {
      for (size_t n = std::min(m.size() - 1, b.size()); n > keep; --n) {
        if (b.substr(b.size() - n) == m.substr(0, n)) {
          keep = n;
          break;
        }
      }
    }
    if (start) {
      const size_t f = FirstNonSpace(b);
      if (f != std::string_view::npos) {
        const std::string_view rest = b.substr(f);
        for (std::string_view m : spec.start_markers) {
          if (rest.size() < m.size() && StartsWith(m, rest)) keep = std::max(keep, rest.size());
        }
      }
    }
    return keep;
  }

  bool WorthTrying(bool at_end) const {
    if (at_end || buf.size() <= kShortBlockBytes || buf.size() >= 2 * last_try) return true;
    const std::string_view fresh = std::string_view(buf).substr(std::min(last_try, buf.size()));
    return fresh.find_first_of(">}]") != std::string_view::npos;
  }

  void EmitCalls(std::vector<ToolCall>& calls, std::vector<ToolCallEvent>* out) {
    for (ToolCall& c : calls) {
      ToolCallEvent begin;
      begin.kind = ToolCallEvent::Kind::kCallBegin;
      begin.index = n_calls;
      begin.text = std::move(c.name);
      begin.id = std::move(c.id);
      out->push_back(std::move(begin));
      ToolCallEvent args;
      args.kind = ToolCallEvent::Kind::kArguments;
      args.index = n_calls;
      args.text = std::move(c.arguments);
      out->push_back(std::move(args));
      ++n_calls;
    }
  }

  void Run(bool at_end, std::vector<ToolCallEvent>* out) {
    while (true) {
      if (pending) {
        if (!WorthTrying(at_end)) return;
        Block b = spec.parse(buf, at_end, schemas);
        last_try = buf.size();
        if (b.status == BlockStatus::kNeedMore) {
          if (!at_end) return;
          b.status = BlockStatus::kMalformed;
        }
        pending = false;
        if (b.status == BlockStatus::kComplete && !b.calls.empty() && !parse_calls) {
          // Without calls, a call is text, as it was written.
          Text(held_space, out);
          held_space.clear();
          Text(std::string_view(buf).substr(0, b.end), out);
          buf.erase(0, b.end);
          start = false;
          after_call = false;
          continue;
        }
        if (b.status == BlockStatus::kComplete) {
          if (!b.trim) Text(held_space, out);
          held_space.clear();
          EmitCalls(b.calls, out);
          buf.erase(0, b.end);
          after_call = b.trim;
          if (b.calls.empty()) start = false;
          if (b.mode) mode = *b.mode;
          continue;
        }
        // Malformed: the marker is text; look for the next one after it.
        Text(held_space, out);
        held_space.clear();
        Text(std::string_view(buf).substr(0, marker_len), out);
        buf.erase(0, marker_len);
        start = false;
        after_call = false;
        continue;
      }
      if (after_call) {
        const size_t f = FirstNonSpace(buf);
        if (f == std::string_view::npos) {
          buf.clear();
          return;
        }
        buf.erase(0, f);
        after_call = false;
      }
      const auto [at, len] = FindMarker();
      if (len > 0) {
        std::string_view before = std::string_view(buf).substr(0, at);
        size_t text_end = before.size();
        while (text_end > 0 && IsJsonSpace(before[text_end - 1])) --text_end;
        if (text_end > 0) start = false;
        Text(before.substr(0, text_end), out);
        held_space = std::string(before.substr(text_end));
        buf.erase(0, at);
        pending = true;
        marker_len = len;
        last_try = 0;
        continue;
      }
      size_t cut = buf.size();
      if (!at_end) {
        cut -= HoldBack();
        while (cut > 0 && IsJsonSpace(buf[cut - 1])) --cut;  // may precede a call
      }
      const std::string_view released = std::string_view(buf).substr(0, cut);
      if (FirstNonSpace(released) != std::string_view::npos) start = false;
      Text(released, out);
      buf.erase(0, cut);
      return;
    }
  }
};

ToolCallStream::ToolCallStream(ToolCallFormat format, const ToolSchemas* schemas,
                               bool parse_calls)
    : impl_(std::make_unique<Impl>(format, schemas, parse_calls)) {}
ToolCallStream::~ToolCallStream() = default;

std::vector<ToolCallEvent> ToolCallStream::Feed(std::string_view text) {
  std::vector<ToolCallEvent> out;
  if (impl_->finished) return out;
  impl_->buf.append(text);
  impl_->Run(/*at_end=*/false, &out);
  return out;
}

std::vector<ToolCallEvent> ToolCallStream::Finish() {
  std::vector<ToolCallEvent> out;
  if (impl_->finished) return out;
  impl_->finished = true;
  impl_->Run(/*at_end=*/true, &out);
  return out;
}

int ToolCallStream::calls() const { return impl_->n_calls; }

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text,
                               const ToolSchemas* schemas, bool parse_calls) {
  ToolCallStream stream(format, schemas, parse_calls);
  std::vector<ToolCallEvent> events = stream.Feed(text);
  std::vector<ToolCallEvent> rest = stream.Finish();
  events.insert(events.end(), std::make_move_iterator(rest.begin()),
                std::make_move_iterator(rest.end()));
  ParsedToolCalls r;
  for (ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        r.content += e.text;
        break;
      case ToolCallEvent::Kind::kReasoning:
        r.reasoning += e.text;
        break;
      case ToolCallEvent::Kind::kCallBegin:
        r.calls.push_back(ToolCall{std::move(e.text), {}, std::move(e.id)});
        break;
      case ToolCallEvent::Kind::kArguments:
        if (e.index >= 0 && static_cast<size_t>(e.index) < r.calls.size()) {
          r.calls[static_cast<size_t>(e.index)].arguments += e.text;
        }
        break;
    }
  }
  return r;
}

}  // namespace mx::toolcalls
