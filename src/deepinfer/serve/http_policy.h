// The HTTP rules around the routes: which methods each path answers (for 405 + Allow and
// for CORS preflights), which browser origins may call the API (--allowed-origins), and the
// API-key check (either header; the Bearer scheme in any case, as RFC 9110 says).
#pragma once

#include <regex>
#include <string>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace deepinfer::serve {

// The served paths and their methods, filled as routes are registered.
class RouteTable {
 public:
  void add(const std::string& method, const std::string& pattern);
  // "GET, POST" for a path some route serves (with any method), "" for an unknown path.
  std::string allowed_methods(const std::string& path) const;

 private:
  struct Entry {
    std::string pattern;
    std::regex re;
    std::vector<std::string> methods;
  };
  std::vector<Entry> entries_;
};

// Origins allowed to call the API from a browser: "*" or exact origins
// ("https://app.example.com"), from a comma-separated flag value. Empty: no CORS headers.
class CorsPolicy {
 public:
  explicit CorsPolicy(const std::string& flag_value);
  bool enabled() const { return any_ || !origins_.empty(); }
  // Adds Access-Control-Allow-Origin (+ Vary, exposed headers) when the request's Origin is
  // allowed; true when it is (or when the request names no origin).
  bool apply(const httplib::Request& req, httplib::Response& res) const;
  // Answers an OPTIONS preflight for a path serving `allow` (204, or 403 for an origin not
  // allowed).
  void preflight(const httplib::Request& req, const std::string& allow, httplib::Response& res) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

// The key the request carries: x-api-key, else "Authorization: Bearer KEY" (scheme in any
// case). "" when neither is present.
std::string request_api_key(const httplib::Request& req);

// Compares in time independent of where the strings differ (the key must not leak by timing).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace deepinfer::serve
