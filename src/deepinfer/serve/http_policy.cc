#include "deepinfer/serve/http_policy.h"

#include <algorithm>
#include <cctype>

#include <httplib.h>

namespace deepinfer::serve {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

void RouteTable::add(const std::string& method, const std::string& pattern) {
  for (Entry& e : entries_)
    if (e.pattern == pattern) {
      e.methods.push_back(method);
      return;
    }
  entries_.push_back({pattern, std::regex(pattern), {method}});
}

std::string RouteTable::allowed_methods(const std::string& path) const {
  std::vector<std::string> methods;
  for (const Entry& e : entries_)
    if (std::regex_match(path, e.re))
      for (const std::string& m : e.methods)
        if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  if (methods.empty()) return "";
  std::string out;
  for (const std::string& m : methods) out += (out.empty() ? "" : ", ") + m;
  if (std::find(methods.begin(), methods.end(), "GET") != methods.end()) out += ", HEAD";
  return out + ", OPTIONS";
}

CorsPolicy::CorsPolicy(const std::string& flag_value) {
  size_t start = 0;
  while (start <= flag_value.size()) {
    size_t comma = flag_value.find(',', start);
    if (comma == std::string::npos) comma = flag_value.size();
    std::string origin = trim(flag_value.substr(start, comma - start));
    while (!origin.empty() && origin.back() == '/') origin.pop_back();
    if (origin == "*") any_ = true;
    else if (!origin.empty()) origins_.push_back(origin);
    start = comma + 1;
  }
}

bool CorsPolicy::apply(const httplib::Request& req, httplib::Response& res) const {
  if (!enabled() || !req.has_header("Origin")) return true;
  const std::string origin = req.get_header_value("Origin");
  const bool ok = any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
  if (!ok) return false;
  res.set_header("Access-Control-Allow-Origin", any_ ? "*" : origin);
  if (!any_) res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "Content-Type, Allow");
  return true;
}

void CorsPolicy::preflight(const httplib::Request& req, const std::string& allow, httplib::Response& res) const {
  if (!enabled() || !apply(req, res)) {
    res.status = 403;
    res.set_content(R"J({"error":{"message":"this origin may not call the API (see --allowed-origins)",)J"
                    R"J("type":"invalid_request_error","param":null,"code":403}})J",
                    "application/json");
    return;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", allow);
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers",
                 asked.empty() ? "Authorization, Content-Type, x-api-key, anthropic-version" : asked);
  res.set_header("Access-Control-Max-Age", "600");
}

std::string request_api_key(const httplib::Request& req) {
  std::string key = req.get_header_value("x-api-key");
  if (!key.empty()) return key;
  const std::string auth = trim(req.get_header_value("Authorization"));
  const size_t space = auth.find(' ');
  if (space == std::string::npos || !iequals(auth.substr(0, space), "Bearer")) return "";
  return trim(auth.substr(space + 1));
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace deepinfer::serve
