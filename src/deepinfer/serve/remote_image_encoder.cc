#include "deepinfer/serve/remote_image_encoder.h"

#include <cstring>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/log.h"
#include "deepinfer/serve/pd_engine_pool.h"
#include "deepinfer/serve/pd_protocol.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;
constexpr auto kDownFor = std::chrono::seconds(5);
constexpr int kEncodeTimeoutSeconds = 300;

Result<vision::ImageEncoderInfo> fetch_info(const std::string& host, int port) {
  httplib::Client cli(host, port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  auto r = cli.Get("/internal/v1/info");
  if (!r) return resource_exhausted("not answering ({})", httplib::to_string(r.error()));
  const json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object() || j.value("role", "") != "vision")
    return invalid_argument("it is not a vision encoder (serve --role vision)");
  if (j.value("protocol", 0) != pd::kProtocolVersion)
    return invalid_argument("it speaks internal protocol {}, this server {}", j.value("protocol", 0), pd::kProtocolVersion);
  vision::ImageEncoderInfo info;
  info.image_token_id = j.value("image_token_id", 0);
  info.tokens_per_image = j.value("tokens_per_image", 0);
  info.embedding_size = j.value("embedding_size", 0);
  info.identity = j.value("identity", "");
  if (info.tokens_per_image <= 0 || info.embedding_size <= 0 || info.identity.empty())
    return invalid_argument("its info lacks tokens_per_image, embedding_size or identity");
  return info;
}

bool same(const vision::ImageEncoderInfo& a, const vision::ImageEncoderInfo& b) {
  return a.image_token_id == b.image_token_id && a.tokens_per_image == b.tokens_per_image &&
         a.embedding_size == b.embedding_size && a.identity == b.identity;
}

std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return body.substr(0, 200);
}

}  // namespace

Result<std::unique_ptr<RemoteImageEncoder>> RemoteImageEncoder::create(const std::vector<std::string>& urls) {
  std::unique_ptr<RemoteImageEncoder> r(new RemoteImageEncoder());
  std::string errors;
  bool have = false;
  for (const std::string& url : urls) {
    if (url.empty()) continue;
    DI_ASSIGN_OR_RETURN(EngineUrl u, parse_engine_url(url));
    r->endpoints_.push_back(Endpoint{u.host, u.port, {}});
    auto info = fetch_info(u.host, u.port);
    if (!info.is_ok()) {
      if (info.status().code() != StatusCode::kResourceExhausted)
        return invalid_argument("--vision-encoder {}: {}", url, info.status().message());
      errors += fmt::format("; {}: {}", url, info.status().message());
      continue;
    }
    if (have && !same(*info, r->info_))
      return invalid_argument("--vision-encoder {}: another model than the other encoders ({} x {}, {} vs {} x {}, {})",
                              url, info->tokens_per_image, info->embedding_size, info->identity,
                              r->info_.tokens_per_image, r->info_.embedding_size, r->info_.identity);
    r->info_ = *info;
    have = true;
  }
  if (r->endpoints_.empty()) return invalid_argument("--vision-encoder: name at least one URL");
  if (!have) return resource_exhausted("--vision-encoder: no encoder answered{}", errors);
  return r;
}


Result<std::vector<float>> RemoteImageEncoder::encode(std::string_view bytes) {
  std::string failures;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    Endpoint e;
    size_t index = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      size_t tries = 0;
      while (tries < endpoints_.size() && endpoints_[next_ % endpoints_.size()].down_until > now) {
        next_ += 1;
        tries += 1;
      }
      if (tries == endpoints_.size()) break;
      index = next_ % endpoints_.size();
      next_ += 1;
      e = endpoints_[index];
    }
    httplib::Client cli(e.host, e.port);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(kEncodeTimeoutSeconds, 0);
    auto r = cli.Post("/internal/v1/encode", std::string(bytes), "application/octet-stream");
    if (r && r->status == 200) {
      const size_t want = size_t(info_.tokens_per_image) * size_t(info_.embedding_size);
      if (r->body.size() != want * sizeof(float))
        return corrupt("vision encoder {}:{} returned {} bytes, {} floats expected", e.host, e.port, r->body.size(), want);
      std::vector<float> out(want);
      std::memcpy(out.data(), r->body.data(), r->body.size());
      return out;
    }
    if (r && r->status == 400) return invalid_argument("{}", error_message(r->body));
    const std::string why = r ? fmt::format("answered {}: {}", r->status, error_message(r->body))
                              : httplib::to_string(r.error());
    failures += fmt::format("; {}:{} {}", e.host, e.port, why);
    log::warn("vision encoder {}:{} failed ({}); trying another", e.host, e.port, why);
    std::lock_guard<std::mutex> lock(mu_);
    endpoints_[index].down_until = std::chrono::steady_clock::now() + kDownFor;
  }
  return resource_exhausted("no vision encoder could encode the image{}", failures);
}

}  // namespace deepinfer::serve
