// The status page's files (src/server/ui/), embedded into the binary at
// build time by src/server/ui/embed.cmake: nothing is read from disk or
// fetched at run time.
#pragma once

#include <string_view>
#include <vector>

namespace mx::server {

struct UiAsset {
  std::string_view path;          // "/" (index.html) or "/ui/<file>"
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

// Every embedded file, in a fixed order (index.html first). Thread-safe.
const std::vector<UiAsset>& UiAssets();

}  // namespace mx::server
