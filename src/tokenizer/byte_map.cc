#include "tokenizer/byte_map.h"

#include "tokenizer/utf8.h"

namespace mx::tokenizer::internal {
namespace {

bool MapsToItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

}  // namespace

ByteMap::ByteMap() {
  decoded_.fill(-1);
  uint32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cpt = MapsToItself(b) ? uint32_t(b) : next_extra++;
    std::string utf8;
    AppendUtf8(cpt, &utf8);
    Entry& e = encoded_[b];
    e.len = static_cast<uint8_t>(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) e.utf8[i] = utf8[i];
    decoded_[cpt] = static_cast<int16_t>(b);
  }
}

const ByteMap& ByteMap::Get() {
  static const ByteMap* map = new ByteMap();
  return *map;
}

void ByteMap::AppendMapped(std::string_view bytes, std::string* out) const {
  for (unsigned char b : bytes) {
    const Entry& e = encoded_[b];
    out->append(e.utf8, e.len);
  }
}

std::string ByteMap::DecodeTokenText(std::string_view text) const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const LenientChar c = DecodeLenient(text, i);
    i += c.len;
    const int byte = ByteForCodepoint(c.cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    AppendUtf8(c.cpt, &utf8);
    out += "[UNK_BYTE_0x";
    for (unsigned char u : utf8) {
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
    out.append(text);
    out.push_back(']');
  }
  return out;
}

}  // namespace mx::tokenizer::internal
