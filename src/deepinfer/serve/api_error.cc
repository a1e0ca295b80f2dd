#include "deepinfer/serve/api_error.h"

namespace deepinfer::serve {

using nlohmann::json;

ApiError api_error_from_status(const Status& status, const std::string& param) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return ApiError(400, param, status.message());
    case StatusCode::kNotFound:
      return ApiError(404, param, status.message(), "not_found_error");
    case StatusCode::kResourceExhausted:
      return ApiError(503, param, status.message(), "overloaded_error");
    default:
      return ApiError(500, param, status.message(), "server_error");
  }
}

std::string openai_error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"code", e.http_status}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  // Messages may quote request text: never throw on invalid UTF-8 while reporting an error.
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string anthropic_error_body(const ApiError& e) {
  // Anthropic's types: invalid_request_error, authentication_error, not_found_error,
  // overloaded_error, api_error.
  std::string type = e.type;
  if (type == "server_error") type = "api_error";
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> opt_number(const json& obj, const char* key, const std::string& path, double min,
                                 double max) {
  const json* f = field(obj, key);
  if (!f) return std::nullopt;
  const std::string name = join_path(path, key);
  if (!f->is_number()) bad_request(name, "'{}' must be a number, got {}", name, f->type_name());
  const double v = f->get<double>();
  if (!(v >= min && v <= max)) bad_request(name, "'{}' must be between {} and {}, got {}", name, min, max, v);
  return v;
}

std::optional<int64_t> opt_int(const json& obj, const char* key, const std::string& path, int64_t min,
                               int64_t max) {
  const json* f = field(obj, key);
  if (!f) return std::nullopt;
  const std::string name = join_path(path, key);
  if (!f->is_number_integer()) {
    // 3.0 is accepted as 3 (JSON has one number type); 3.5 is not.
    if (f->is_number_float() && f->get<double>() == double(int64_t(f->get<double>())))
      return opt_int(json{{key, int64_t(f->get<double>())}}, key, path, min, max);
    bad_request(name, "'{}' must be an integer, got {}", name, f->dump());
  }
  const int64_t v = f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : f->get<int64_t>();
  if (v < min || v > max) bad_request(name, "'{}' must be between {} and {}, got {}", name, min, max, f->dump());
  return v;
}

std::optional<bool> opt_bool(const json& obj, const char* key, const std::string& path) {
  const json* f = field(obj, key);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) bad_request(join_path(path, key), "'{}' must be a boolean, got {}", join_path(path, key), f->type_name());
  return f->get<bool>();
}

std::optional<std::string> opt_string(const json& obj, const char* key, const std::string& path) {
  const json* f = field(obj, key);
  if (!f) return std::nullopt;
  if (!f->is_string()) bad_request(join_path(path, key), "'{}' must be a string, got {}", join_path(path, key), f->type_name());
  return f->get<std::string>();
}

std::string req_string(const json& obj, const char* key, const std::string& path) {
  auto v = opt_string(obj, key, path);
  if (!v) bad_request(join_path(path, key), "'{}' is required", join_path(path, key));
  return *v;
}

}  // namespace deepinfer::serve
