// The server's HTTP rules without a server: UTF-8 checking of request bodies (with the offset
// of the first bad byte), the Bearer scheme in any case, CORS origins, and the method table
// behind 405 + Allow.
#include <gtest/gtest.h>

#include <string>

#include <httplib.h>

#include "deepinfer/serve/http_policy.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {
namespace {

TEST(FirstInvalidUtf8, AcceptsValidText) {
  EXPECT_EQ(first_invalid_utf8(""), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("plain ascii {}"), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), std::string::npos);
}

TEST(FirstInvalidUtf8, NamesTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2u);                // never a UTF-8 byte
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);                 // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("caf\xc3"), 3u);               // cut at the end
  EXPECT_EQ(first_invalid_utf8("x\xc3(y"), 1u);               // lead byte without continuation
  EXPECT_EQ(first_invalid_utf8("\xc0\xaf"), 0u);              // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xe0\x80\xaf"), 0u);          // overlong, three bytes
  EXPECT_EQ(first_invalid_utf8("ok\xed\xa0\x80"), 2u);        // a UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xe2\x82\xac\xe2\x82"), 3u);  // good, then cut
}

httplib::Request with_header(const std::string& name, const std::string& value) {
  httplib::Request req;
  req.headers.emplace(name, value);
  return req;
}

TEST(RequestApiKey, TakesEitherHeaderAndAnyCaseOfBearer) {
  EXPECT_EQ(request_api_key(with_header("x-api-key", "k")), "k");
  EXPECT_EQ(request_api_key(with_header("Authorization", "Bearer k")), "k");
  EXPECT_EQ(request_api_key(with_header("Authorization", "bearer k")), "k");
  EXPECT_EQ(request_api_key(with_header("Authorization", "BEARER  k ")), "k");
  EXPECT_EQ(request_api_key(with_header("Authorization", "Basic k")), "");
  EXPECT_EQ(request_api_key(with_header("Authorization", "Bearerk")), "");
  EXPECT_EQ(request_api_key(httplib::Request()), "");
}

TEST(CorsPolicy, OffByDefaultAndExactOrigins) {
  EXPECT_FALSE(CorsPolicy("").enabled());
  const CorsPolicy cors(" https://a.example/ , http://b.example:3000");
  EXPECT_TRUE(cors.enabled());
  httplib::Response res;
  EXPECT_TRUE(cors.apply(with_header("Origin", "https://a.example"), res));
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "https://a.example");
  httplib::Response other;
  EXPECT_FALSE(cors.apply(with_header("Origin", "https://a.example.evil"), other));
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));
  httplib::Response any;
  EXPECT_TRUE(CorsPolicy("*").apply(with_header("Origin", "http://x"), any));
  EXPECT_EQ(any.get_header_value("Access-Control-Allow-Origin"), "*");
}

TEST(CorsPolicy, PreflightAnswersOnlyAllowedOrigins) {
  const CorsPolicy cors("http://app.example");
  httplib::Request req = with_header("Origin", "http://app.example");
  req.headers.emplace("Access-Control-Request-Headers", "authorization, content-type");
  httplib::Response ok;
  cors.preflight(req, "POST, OPTIONS", ok);
  EXPECT_EQ(ok.status, 204);
  EXPECT_EQ(ok.get_header_value("Access-Control-Allow-Methods"), "POST, OPTIONS");
  EXPECT_EQ(ok.get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  httplib::Response refused;
  cors.preflight(with_header("Origin", "http://evil.example"), "POST, OPTIONS", refused);
  EXPECT_EQ(refused.status, 403);
  EXPECT_FALSE(refused.has_header("Access-Control-Allow-Origin"));
}

TEST(RouteTable, ListsTheMethodsOfAPath) {
  RouteTable t;
  t.add("POST", "/v1/chat/completions");
  t.add("GET", "/v1/models");
  t.add("GET", "/v1/models/(.+)");
  t.add("POST", "/v1/models");  // a second method on one pattern
  EXPECT_EQ(t.allowed_methods("/v1/chat/completions"), "POST, OPTIONS");
  EXPECT_EQ(t.allowed_methods("/v1/models"), "GET, POST, HEAD, OPTIONS");
  EXPECT_EQ(t.allowed_methods("/v1/models/org/name"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(t.allowed_methods("/v1/chat/completions/x"), "");
  EXPECT_EQ(t.allowed_methods("/nothing"), "");
}

}  // namespace
}  // namespace deepinfer::serve
