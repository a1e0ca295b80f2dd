// Request errors inside serve/: handlers throw ApiError while reading a body (so parsing
// code stays linear), and the route wrapper turns it into the API's own error shape. Nothing
// else in the codebase throws; the exception never leaves serve/.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"

namespace deepinfer::serve {

struct ApiError : std::runtime_error {
  int http_status = 400;
  std::string param;  // the offending field, e.g. "messages[2].content"
  std::string type = "invalid_request_error";
  ApiError(int status, std::string param_name, const std::string& message,
           std::string error_type = "invalid_request_error")
      : std::runtime_error(message), http_status(status), param(std::move(param_name)),
        type(std::move(error_type)) {}
};

template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> f, Args&&... args) {
  throw ApiError(400, param, fmt::format(f, std::forward<Args>(args)...));
}

// Status -> ApiError: kInvalidArgument 400, kNotFound 404, kUnsupported 400,
// kResourceExhausted 503 (queue full, shutting down), others 500.
ApiError api_error_from_status(const Status& status, const std::string& param = "");

// {"error": {"message", "type", "param", "code"}}
std::string openai_error_body(const ApiError& e);
// {"type": "error", "error": {"type", "message"}}
std::string anthropic_error_body(const ApiError& e);

// Typed access to optional fields of a JSON object; a present field of the wrong type or out
// of range is a 400 naming `path` + key. JSON null counts as absent (as the SDKs send it).
const nlohmann::json* field(const nlohmann::json& obj, const char* key);
std::optional<double> opt_number(const nlohmann::json& obj, const char* key, const std::string& path,
                                 double min, double max);
std::optional<int64_t> opt_int(const nlohmann::json& obj, const char* key, const std::string& path,
                               int64_t min, int64_t max);
std::optional<bool> opt_bool(const nlohmann::json& obj, const char* key, const std::string& path);
std::optional<std::string> opt_string(const nlohmann::json& obj, const char* key, const std::string& path);
std::string req_string(const nlohmann::json& obj, const char* key, const std::string& path);
// "a.b" or "b" when path is empty.
std::string join_path(const std::string& path, const std::string& key);

}  // namespace deepinfer::serve
