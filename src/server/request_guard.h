// Pure checks of where a request comes from (SPEC §14): the Host a client
// asked for and the Origin of a browser page. They defend the server, which
// listens on loopback by default, against web pages: a foreign page's
// request carries its Origin, and DNS rebinding (a foreign name resolving to
// 127.0.0.1) shows in Host.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx::server {

// True for "localhost", 127.0.0.0/8 and ::1 (with or without brackets).
bool IsLoopbackHost(std::string_view host);

// The host part of a Host field value ("[::1]:8080" -> "::1",
// "Example.com.:80" -> "example.com"), lower-cased; "" when malformed.
std::string HostOfHostField(std::string_view value);

// Whether a Host field value is acceptable for a server listening on
// loopback: a loopback name or address, or one of `extra` (lower-case names).
bool LoopbackHostAllowed(std::string_view host_field, const std::vector<std::string>& extra);

// "HTTPS://App.Example:443/" -> "https://app.example:443": scheme and host
// lower-cased, a trailing '/' dropped. "" when `origin` is not
// scheme://host[:port] with scheme http or https.
std::string NormalizeOrigin(std::string_view origin);

// `allowed` holds normalized origins or "*" (any origin).
bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed);

// Whether `origin` is the server's own for the Host a request asked for
// ("http://" + the Host field value): a page this server served itself (the
// status page at GET /), whose requests that change state carry their
// Origin. Only for a loopback Host or one of `extra_hosts`: a foreign name
// that resolves to the server (DNS rebinding) is never its own origin.
bool IsOwnOrigin(std::string_view origin, std::string_view host_field,
                 const std::vector<std::string>& extra_hosts);

// Parses a comma-separated list of origins (MATRICXON_ALLOWED_ORIGINS):
// normalized, or "*". InvalidArgument naming `name` and the bad entry.
Result<std::vector<std::string>> ParseOriginList(const std::string& name, const std::string& value);
// Parses a comma-separated list of host names (MATRICXON_ALLOWED_HOSTS),
// lower-cased. InvalidArgument naming `name` and the bad entry.
Result<std::vector<std::string>> ParseHostList(const std::string& name, const std::string& value);

}  // namespace mx::server
