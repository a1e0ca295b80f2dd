// The entrypoint's view of its engines: URL parsing and the decode balancer.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "deepinfer/serve/pd_engine_pool.h"

namespace deepinfer::serve {
namespace {

std::shared_ptr<RemoteEngine> engine(const char* address, int in_flight, double kv_usage) {
  auto e = std::make_shared<RemoteEngine>();
  e->address = address;
  e->in_flight = in_flight;
  e->kv_cache_usage = kv_usage;
  return e;
}

TEST(PdDecodeBalancer, FewestInFlightThenEmptierKvAndNeverANearlyFullCacheWhileAnotherHasRoom) {
  EXPECT_EQ(least_loaded_decode({}), nullptr);
  auto a = engine("a", 3, 0.10), b = engine("b", 1, 0.50), c = engine("c", 1, 0.20);
  EXPECT_EQ(least_loaded_decode({a, b, c})->address, "c");  // tie on in-flight: emptier KV
  c->kv_cache_usage = 0.95;                                  // nearly full: avoided...
  EXPECT_EQ(least_loaded_decode({a, b, c})->address, "b");
  b->kv_cache_usage = 0.91;
  EXPECT_EQ(least_loaded_decode({a, b, c})->address, "a");  // ...even with more in flight elsewhere
  a->kv_cache_usage = 0.99;                                  // all nearly full: fewest in flight
  EXPECT_EQ(least_loaded_decode({a, b, c})->address, "b");
}

TEST(PdEngineUrl, HostAndPortOrAClearError) {
  auto u = parse_engine_url("http://10.0.0.7:8001/");
  ASSERT_TRUE(u.is_ok()) << u.status().message();
  EXPECT_EQ(u->host, "10.0.0.7");
  EXPECT_EQ(u->port, 8001);
  u = parse_engine_url("prefill.default.svc:9000");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "prefill.default.svc");
  for (const char* bad : {"ftp://x:1", "http://host", "http://host:0", "http://host:99999", "http://:80", ""}) {
    auto r = parse_engine_url(bad);
    EXPECT_FALSE(r.is_ok()) << bad;
  }
}

}  // namespace
}  // namespace deepinfer::serve
