#include "server/http_util.h"

namespace mx::server {
namespace {

const char* ErrorType(int http_code) {
  switch (http_code) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 408: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 414: return "invalid_request_error";
    case 431: return "invalid_request_error";
    case 503: return "server_busy_error";
    default: return "server_error";
  }
}

}  // namespace

int HttpCode(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk: return 200;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotSupported: return 400;
    case Status::Code::kResourceExhausted: return 503;
    default: return 500;
  }
}

Json ErrorJson(int http_code, const std::string& message, const std::string& code) {
  Json err = {{"message", message}, {"type", ErrorType(http_code)}, {"param", nullptr}, {"code", nullptr}};
  if (!code.empty()) err["code"] = code;
  return Json{{"error", err}};
}

Json ErrorJson(const Status& status, const std::string& param) {
  const int http = HttpCode(status);
  std::string code;
  if (status.code() == Status::Code::kNotFound) code = "model_not_found";
  Json j = ErrorJson(http, status.message(), code);
  if (!param.empty()) j["error"]["param"] = param;
  return j;
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void SendJson(HttpResponse& res, const Json& body, int http_code) {
  res.status = http_code;
  res.set_content(Dump(body), "application/json");
}

void SendError(HttpResponse& res, const Status& status) { SendJson(res, ErrorJson(status), HttpCode(status)); }

void SendError(HttpResponse& res, int http_code, const std::string& message, const std::string& code) {
  SendJson(res, ErrorJson(http_code, message, code), http_code);
}

}  // namespace mx::server
