// Fetching a remote picture (`image_url` with an http(s) URL; docs/vision.md):
// only from the hosts MATRICXON_IMAGE_URL_HOSTS names; never from a
// loopback, link-local, private or otherwise non-public address unless the
// list names that address itself (a name like `localhost` is not enough);
// always connecting to the address that was checked (no second lookup that
// could answer differently); no redirects; one deadline for the whole fetch
// (connect, head and body; a server that sends a byte a second does not
// stretch it) and the picture byte limit.
#pragma once

#include <string>

#include "server/image_input.h"

namespace mx::server {

// What kind of non-public address `ip` (an IPv4 or IPv6 literal) is:
// "loopback", "link-local", "private", "unspecified", "multicast",
// "reserved" or "carrier-grade NAT"; "" for a public address, and
// "not an address" when `ip` does not parse.
std::string NonPublicAddressKind(const std::string& ip);

// Fetches `url` (http or https) within `options` (hosts, max_bytes,
// fetch_timeout_s) into *bytes. False with *error: 400 for a URL or host
// that is refused, a fetch that failed or passed its deadline, a status
// other than 200; 413 over the byte limit.
bool FetchPicture(const std::string& url, const ImageInputOptions& options, std::string* bytes,
                  ImageError* error);

}  // namespace mx::server
