#include "deepinfer/serve/pd_engine_pool.h"

#include <netdb.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/log.h"
#include "deepinfer/serve/pd_protocol.h"

namespace deepinfer::serve {
namespace {

// Every IPv4/IPv6 address `host` resolves to, as text.
std::vector<std::string> resolve(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr = p->ai_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr)
                                               : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr);
    if (inet_ntop(p->ai_family, addr, buf, sizeof buf) == nullptr) continue;
    if (std::find(out.begin(), out.end(), buf) == out.end()) out.emplace_back(buf);
  }
  freeaddrinfo(res);
  // localhost resolves to ::1 and 127.0.0.1: one engine, not two.
  if (out.size() > 1 && std::find(out.begin(), out.end(), "127.0.0.1") != out.end())
    std::erase(out, std::string("::1"));
  return out;
}

}  // namespace

Result<EngineUrl> parse_engine_url(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos)
    return invalid_argument("engine URL '{}': only http:// is supported", url);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return invalid_argument("engine URL '{}': needs host:port", url);
  EngineUrl out;
  out.host = rest.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') out.host = out.host.substr(1, out.host.size() - 2);
  try {
    size_t used = 0;
    out.port = std::stoi(rest.substr(colon + 1), &used);
    if (used != rest.size() - colon - 1) throw std::invalid_argument("port");
  } catch (...) {
    return invalid_argument("engine URL '{}': the port is not a number", url);
  }
  if (out.port <= 0 || out.port > 65535) return invalid_argument("engine URL '{}': port out of range", url);
  return out;
}

Result<std::unique_ptr<EnginePool>> EnginePool::create(std::string role, const std::vector<std::string>& urls) {
  std::unique_ptr<EnginePool> pool(new EnginePool());
  pool->role_ = std::move(role);
  for (const std::string& u : urls) {
    if (u.empty()) continue;
    DI_ASSIGN_OR_RETURN(EngineUrl parsed, parse_engine_url(u));
    pool->urls_.push_back(parsed);
  }
  if (pool->urls_.empty()) return invalid_argument("--{}: name at least one engine URL", pool->role_);
  return pool;
}

void EnginePool::refresh(std::string& kv_namespace) {
  std::vector<std::pair<std::string, int>> addresses;
  for (const EngineUrl& u : urls_)
    for (const std::string& ip : resolve(u.host))
      if (std::find(addresses.begin(), addresses.end(), std::pair{ip, u.port}) == addresses.end())
        addresses.emplace_back(ip, u.port);
  std::vector<std::shared_ptr<RemoteEngine>> current;
  {
    std::lock_guard lock(mu_);
    for (const auto& [ip, port] : addresses) {
      const std::string name = ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port)
                                                                  : fmt::format("{}:{}", ip, port);
      auto it = std::find_if(engines_.begin(), engines_.end(), [&](const auto& e) { return e->address == name; });
      if (it != engines_.end()) {
        current.push_back(*it);
      } else {
        auto e = std::make_shared<RemoteEngine>();
        e->address = name;
        e->host = ip;
        e->port = port;
        e->down_reason = "not checked yet";
        current.push_back(std::move(e));
      }
    }
    engines_ = current;  // an address no longer resolved leaves the pool (its requests finish)
  }
  for (const auto& e : current) {
    httplib::Client cli(e->host, e->port);
    cli.set_connection_timeout(1, 0);
    cli.set_read_timeout(3, 0);
    auto r = cli.Get("/internal/v1/info");
    std::string why;
    nlohmann::json info;
    if (!r) {
      why = "not answering (" + httplib::to_string(r.error()) + ")";
    } else if (r->status != 200) {
      why = fmt::format("GET /internal/v1/info answered {}", r->status);
    } else {
      info = nlohmann::json::parse(r->body, nullptr, false);
      if (!info.is_object() || info.value("role", "") != role_)
        why = fmt::format("it is not a {} engine (serve --role {})", role_, role_);
      else if (info.value("protocol", 0) != pd::kProtocolVersion)
        why = fmt::format("it speaks internal protocol {}, this entrypoint {}", info.value("protocol", 0),
                          pd::kProtocolVersion);
      else if (role_ == "decode" && info.value("kv_address", "").empty())
        why = "it has no KV transfer address";
    }
    if (why.empty()) {
      const std::string ns = info.value("kv_namespace", "");
      if (kv_namespace.empty()) kv_namespace = ns;
      if (ns != kv_namespace) why = "its KV namespace differs (another model, weights or KV settings than the other engines)";
    }
    std::lock_guard lock(mu_);
    const bool was = e->healthy.load();
    if (why.empty()) {
      e->kv_address = info.value("kv_address", "");
      e->kv_namespace = info.value("kv_namespace", "");
      e->kv_block_tokens = info.value("kv_block_tokens", 0);
      e->kv_store_id = info.value("kv_store_id", "");
      e->kv_cache_usage = info.value("kv_cache_usage", 0.0);
      e->running = info.value("running", 0);
      e->down_reason.clear();
      e->healthy = true;
      if (!was) log::info("entrypoint: {} engine {} is up", role_, e->address);
    } else {
      e->healthy = false;
      if (was || e->down_reason != why) log::warn("entrypoint: {} engine {} is down: {}", role_, e->address, why);
      e->down_reason = why;
    }
  }
}

std::vector<std::shared_ptr<RemoteEngine>> EnginePool::healthy() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<RemoteEngine>> out;
  for (const auto& e : engines_)
    if (e->healthy) out.push_back(e);
  return out;
}

size_t EnginePool::size() const {
  std::lock_guard lock(mu_);
  return engines_.size();
}

void EnginePool::mark_down(const std::shared_ptr<RemoteEngine>& e, const std::string& why) {
  std::lock_guard lock(mu_);
  e->failures += 1;
  if (e->healthy.exchange(false)) log::warn("entrypoint: {} engine {} is down: {}", role_, e->address, why);
  e->down_reason = why;
}

std::string EnginePool::kv_address(const RemoteEngine& e) const {
  std::lock_guard lock(mu_);
  return e.kv_address;
}

std::string EnginePool::kv_store_id(const RemoteEngine& e) const {
  std::lock_guard lock(mu_);
  return e.kv_store_id;
}

std::shared_ptr<RemoteEngine> least_loaded_decode(const std::vector<std::shared_ptr<RemoteEngine>>& candidates) {
  auto key = [](const RemoteEngine& e) {
    const double usage = e.kv_cache_usage.load();
    return std::tuple(usage >= kKvUsageFull, e.in_flight.load(), usage);
  };
  std::shared_ptr<RemoteEngine> best;
  for (const auto& e : candidates)
    if (!best || key(*e) < key(*best)) best = e;
  return best;
}

std::string pool_metrics_text(const std::vector<const EnginePool*>& pools) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Family kFamilies[] = {
      {"up", "gauge", "Whether the entrypoint's last health check of the engine passed."},
      {"in_flight", "gauge", "Requests the entrypoint has at the engine now."},
      {"queued_prompt_tokens", "gauge", "Prefill: prompt tokens the engine is computing for the entrypoint."},
      {"requests_total", "counter", "Requests the entrypoint sent to the engine."},
      {"failures_total", "counter", "Requests that failed to reach the engine or that it failed."},
  };
  std::string out;
  for (const Family& f : kFamilies) {  // one family's samples together, as Prometheus expects
    out += fmt::format("# HELP deepinfer_pd_engine_{0} {1}\n# TYPE deepinfer_pd_engine_{0} {2}\n", f.name, f.help, f.type);
    for (const EnginePool* pool : pools) {
      std::lock_guard lock(pool->mu_);
      for (const auto& e : pool->engines_) {
        const std::string n = f.name;
        const uint64_t v = n == "up" ? (e->healthy ? 1 : 0)
                           : n == "in_flight" ? uint64_t(std::max(0, e->in_flight.load()))
                           : n == "queued_prompt_tokens" ? uint64_t(std::max<int64_t>(0, e->queued_prompt_tokens.load()))
                           : n == "requests_total" ? e->requests.load()
                                                   : e->failures.load();
        out += fmt::format("deepinfer_pd_engine_{}{{pool=\"{}\",engine=\"{}\"}} {}\n", f.name, pool->role_, e->address, v);
      }
    }
  }
  return out;
}

std::string EnginePool::describe() const {
  std::lock_guard lock(mu_);
  int up = 0;
  std::string down;
  for (const auto& e : engines_) {
    if (e->healthy) ++up;
    else down += fmt::format("; {} down: {}", e->address, e->down_reason);
  }
  return fmt::format("{}: {} of {} engines healthy{}", role_, up, engines_.size(), down);
}

}  // namespace deepinfer::serve
