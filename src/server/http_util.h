// HTTP helpers shared by the handlers: Status -> HTTP code (the ONE place
// that mapping lives), the OpenAI error shape, JSON responses.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "server/http_types.h"

namespace mx::server {

using Json = nlohmann::json;

// NotFound -> 404, InvalidArgument -> 400, ResourceExhausted -> 503,
// NotSupported -> 400, everything else -> 500.
int HttpCode(const Status& status);

// {"error": {"message", "type", "param", "code"}} for `status`.
Json ErrorJson(const Status& status, const std::string& param = "");
// The same with an explicit HTTP code and OpenAI error type / code.
Json ErrorJson(int http_code, const std::string& message, const std::string& code = "");

void SendError(HttpResponse& res, const Status& status);
void SendError(HttpResponse& res, int http_code, const std::string& message, const std::string& code = "");
void SendJson(HttpResponse& res, const Json& body, int http_code = 200);

// Serializes with invalid UTF-8 replaced by U+FFFD (token pieces may be partial).
std::string Dump(const Json& j);

}  // namespace mx::server
