#include "deepinfer/serve/pd_protocol.h"

#include <cstring>

#include "deepinfer/vision/data_url.h"

namespace deepinfer::serve::pd {
namespace {

using nlohmann::json;

constexpr uint32_t kMagic = 0x4b564231;  // "KVB1"
constexpr size_t kHeaderBytes = 4 + 4 + 4 + 32 + 4;  // magic, version, index, key, kind
constexpr uint32_t kLayerMagic = 0x4b564c31;  // "KVL1"
constexpr size_t kLayerHeaderBytes = 4 * 5;   // magic, version, layer, layers, blocks
constexpr uint32_t kMaxLayerMessageBlocks = 1u << 20;

json logprob_to_json(const engine::LogprobEntry& e) {
  json top = json::array();
  for (const auto& [id, lp] : e.top) top.push_back({id, lp});
  return {{"id", e.token_id}, {"lp", e.logprob}, {"top", std::move(top)}};
}

engine::LogprobEntry logprob_from_json(const json& j) {
  engine::LogprobEntry e;
  e.token_id = j.at("id").get<int32_t>();
  e.logprob = j.at("lp").get<float>();
  for (const auto& t : j.at("top")) e.top.emplace_back(t.at(0).get<int32_t>(), t.at(1).get<float>());
  return e;
}

const char* grammar_kind_name(structured::GrammarSpec::Kind k) {
  switch (k) {
    case structured::GrammarSpec::kJsonSchema: return "json_schema";
    case structured::GrammarSpec::kJsonObject: return "json_object";
    case structured::GrammarSpec::kRegex: return "regex";
    case structured::GrammarSpec::kEbnf: return "ebnf";
  }
  return "json_object";
}

}  // namespace

json request_to_json(const engine::GenerationRequest& r) {
  const engine::SamplingParams& s = r.sampling;
  json bias = json::array();
  for (const auto& [id, b] : s.logit_bias) bias.push_back({id, b});
  json j = {
      {"prompt_ids", r.prompt_ids},
      {"sampling",
       {{"temperature", s.temperature}, {"top_p", s.top_p}, {"top_k", s.top_k}, {"min_p", s.min_p},
        {"repetition_penalty", s.repetition_penalty}, {"frequency_penalty", s.frequency_penalty},
        {"presence_penalty", s.presence_penalty}, {"seed", s.seed}, {"has_seed", s.has_seed},
        {"logprobs", s.logprobs}, {"logit_bias", std::move(bias)}}},
      {"max_tokens", r.max_tokens},
      {"stop", r.stop},
      {"ignore_eos", r.ignore_eos},
      {"prompt_logprobs", r.prompt_logprobs},
      {"speculative", r.speculative},
      {"kv_export_tag", r.kv_export_tag},
  };
  if (r.grammar) {
    const auto& o = r.grammar->opts;
    j["grammar"] = {{"kind", grammar_kind_name(r.grammar->kind)},
                    {"source", r.grammar->source},
                    {"any_whitespace", o.any_whitespace},
                    {"strict_properties", o.strict_properties},
                    {"enforce_formats", o.enforce_formats},
                    {"any_order_keys", o.any_order_keys}};
  }
  if (r.traffic_class) j["traffic_class"] = std::string(kvstore::traffic_class_name(*r.traffic_class));
  if (r.swa_restore) j["swa_restore"] = *r.swa_restore == engine::SwaRestore::kExact ? "exact" : "bounded";
  if (!r.images.empty()) {
    json images = json::array();
    for (const engine::PromptImage& img : r.images) {
      const std::string_view raw = img.embeddings ? std::string_view(reinterpret_cast<const char*>(img.embeddings->data()),
                                                                     img.embeddings->size() * sizeof(float))
                                                  : std::string_view();
      images.push_back({{"start", img.start}, {"length", img.length}, {"hash", {img.hash[0], img.hash[1]}},
                        {"embeddings", vision::base64_from_bytes(raw)}});
    }
    j["images"] = std::move(images);
  }
  return j;
}

Result<engine::GenerationRequest> request_from_json(const json& j) {
  engine::GenerationRequest r;
  try {
    r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
    const json& s = j.at("sampling");
    r.sampling.temperature = s.at("temperature").get<float>();
    r.sampling.top_p = s.at("top_p").get<float>();
    r.sampling.top_k = s.at("top_k").get<int>();
    r.sampling.min_p = s.at("min_p").get<float>();
    r.sampling.repetition_penalty = s.at("repetition_penalty").get<float>();
    r.sampling.frequency_penalty = s.at("frequency_penalty").get<float>();
    r.sampling.presence_penalty = s.at("presence_penalty").get<float>();
    r.sampling.seed = s.at("seed").get<uint64_t>();
    r.sampling.has_seed = s.at("has_seed").get<bool>();
    r.sampling.logprobs = s.at("logprobs").get<int>();
    for (const auto& b : s.at("logit_bias")) r.sampling.logit_bias.emplace_back(b.at(0).get<int32_t>(), b.at(1).get<float>());
    r.max_tokens = j.at("max_tokens").get<int>();
    r.stop = j.at("stop").get<std::vector<std::string>>();
    r.ignore_eos = j.at("ignore_eos").get<bool>();
    r.prompt_logprobs = j.at("prompt_logprobs").get<int>();
    r.speculative = j.at("speculative").get<bool>();
    r.kv_export_tag = j.at("kv_export_tag").get<std::string>();
    if (j.contains("grammar")) {
      const json& g = j["grammar"];
      structured::GrammarSpec spec;
      const std::string kind = g.at("kind").get<std::string>();
      if (kind == "json_schema") spec.kind = structured::GrammarSpec::kJsonSchema;
      else if (kind == "json_object") spec.kind = structured::GrammarSpec::kJsonObject;
      else if (kind == "regex") spec.kind = structured::GrammarSpec::kRegex;
      else if (kind == "ebnf") spec.kind = structured::GrammarSpec::kEbnf;
      else return invalid_argument("request.grammar.kind: unknown kind '{}'", kind);
      spec.source = g.at("source").get<std::string>();
      spec.opts.any_whitespace = g.at("any_whitespace").get<bool>();
      spec.opts.strict_properties = g.at("strict_properties").get<bool>();
      spec.opts.enforce_formats = g.at("enforce_formats").get<bool>();
      spec.opts.any_order_keys = g.at("any_order_keys").get<bool>();
      r.grammar = std::move(spec);
    }
    if (j.contains("traffic_class")) {
      r.traffic_class = kvstore::traffic_class_from_name(j["traffic_class"].get<std::string>());
      if (!r.traffic_class) return invalid_argument("request.traffic_class: unknown class");
    }
    if (j.contains("swa_restore")) {
      r.swa_restore = engine::swa_restore_from_name(j["swa_restore"].get<std::string>());
      if (!r.swa_restore) return invalid_argument("request.swa_restore: unknown value");
    }
    if (j.contains("images")) {
      for (const json& im : j.at("images")) {
        engine::PromptImage img;
        img.start = im.at("start").get<int32_t>();
        img.length = im.at("length").get<int32_t>();
        img.hash = {im.at("hash").at(0).get<uint64_t>(), im.at("hash").at(1).get<uint64_t>()};
        DI_ASSIGN_OR_RETURN(std::string raw, vision::bytes_from_base64(im.at("embeddings").get<std::string>(),
                                                                       "request.images[].embeddings"));
        if (raw.size() % sizeof(float) != 0) return invalid_argument("request.images[].embeddings: not float32 rows");
        auto emb = std::make_shared<std::vector<float>>(raw.size() / sizeof(float));
        std::memcpy(emb->data(), raw.data(), raw.size());
        img.embeddings = std::move(emb);  // sizes are checked against the model by the engine
        r.images.push_back(std::move(img));
      }
    }
  } catch (const json::exception& e) {
    return invalid_argument("internal request: {}", e.what());
  }
  return r;
}

json output_to_json(const engine::RequestOutput& o) {
  json lps = json::array(), plps = json::array();
  for (const auto& e : o.new_logprobs) lps.push_back(logprob_to_json(e));
  for (const auto& e : o.prompt_logprobs) plps.push_back(logprob_to_json(e));
  return {{"ids", o.new_token_ids}, {"text", o.new_text}, {"logprobs", std::move(lps)},
          {"prompt_logprobs", std::move(plps)}, {"finished", o.finished},
          {"finish_reason", static_cast<int>(o.finish_reason)}, {"error", o.error},
          {"prompt_tokens", o.prompt_tokens}, {"completion_tokens", o.completion_tokens},
          {"cached_tokens", o.cached_tokens}, {"replayed_tokens", o.replayed_tokens}};
}

Result<engine::RequestOutput> output_from_json(const json& j) {
  engine::RequestOutput o;
  try {
    o.new_token_ids = j.at("ids").get<std::vector<int32_t>>();
    o.new_text = j.at("text").get<std::string>();
    for (const auto& e : j.at("logprobs")) o.new_logprobs.push_back(logprob_from_json(e));
    for (const auto& e : j.at("prompt_logprobs")) o.prompt_logprobs.push_back(logprob_from_json(e));
    o.finished = j.at("finished").get<bool>();
    const int reason = j.at("finish_reason").get<int>();
    if (reason < 0 || reason > static_cast<int>(engine::FinishReason::kGrammarDeadEnd))
      return invalid_argument("internal output: finish_reason {} out of range", reason);
    o.finish_reason = static_cast<engine::FinishReason>(reason);
    o.error = j.at("error").get<std::string>();
    o.prompt_tokens = j.at("prompt_tokens").get<int>();
    o.completion_tokens = j.at("completion_tokens").get<int>();
    o.cached_tokens = j.at("cached_tokens").get<int>();
    o.replayed_tokens = j.at("replayed_tokens").get<int>();
  } catch (const json::exception& e) {
    return invalid_argument("internal output: {}", e.what());
  }
  return o;
}

std::vector<uint8_t> encode_kv_block(int32_t index, const std::array<uint8_t, 32>& key,
                                     std::span<const uint8_t> bytes, kvstore::EntryKind kind) {
  std::vector<uint8_t> m(kHeaderBytes + bytes.size());
  const uint32_t magic = kMagic, version = kProtocolVersion;
  std::memcpy(m.data(), &magic, 4);
  std::memcpy(m.data() + 4, &version, 4);
  std::memcpy(m.data() + 8, &index, 4);
  std::memcpy(m.data() + 12, key.data(), 32);
  const uint32_t kind_value = uint32_t(kind);
  std::memcpy(m.data() + 44, &kind_value, 4);
  if (!bytes.empty()) std::memcpy(m.data() + kHeaderBytes, bytes.data(), bytes.size());
  return m;
}

Result<KvBlockMessage> decode_kv_block(std::span<const uint8_t> message) {
  if (message.size() < kHeaderBytes)
    return corrupt("KV block message: {} bytes, shorter than its {}-byte header", message.size(), kHeaderBytes);
  uint32_t magic = 0, version = 0;
  std::memcpy(&magic, message.data(), 4);
  std::memcpy(&version, message.data() + 4, 4);
  if (magic != kMagic) return corrupt("KV block message: bad magic {:#x}", magic);
  if (version != uint32_t(kProtocolVersion))
    return corrupt("KV block message: protocol version {} (this engine speaks {})", version, kProtocolVersion);
  KvBlockMessage out;
  std::memcpy(&out.index, message.data() + 8, 4);
  std::memcpy(out.key.data(), message.data() + 12, 32);
  uint32_t kind = 0;
  std::memcpy(&kind, message.data() + 44, 4);
  if (kind >= uint32_t(kvstore::kNumEntryKinds))
    return corrupt("KV block message: unknown entry kind {} (this engine knows {})", kind, kvstore::kNumEntryKinds);
  out.kind = kvstore::EntryKind(kind);
  out.bytes = message.subspan(kHeaderBytes);
  return out;
}

std::vector<uint8_t> encode_kv_layer(int32_t layer, int32_t num_layers,
                                     std::span<const std::array<uint8_t, 32>> keys,
                                     std::span<const uint8_t> slices) {
  std::vector<uint8_t> m(kLayerHeaderBytes + 32 * keys.size() + slices.size());
  const uint32_t header[5] = {kLayerMagic, uint32_t(kProtocolVersion), uint32_t(layer), uint32_t(num_layers),
                              uint32_t(keys.size())};
  std::memcpy(m.data(), header, sizeof(header));
  uint8_t* p = m.data() + kLayerHeaderBytes;
  for (const auto& k : keys) {
    std::memcpy(p, k.data(), 32);
    p += 32;
  }
  if (!slices.empty()) std::memcpy(p, slices.data(), slices.size());
  return m;
}

bool is_kv_layer_message(std::span<const uint8_t> message) {
  uint32_t magic = 0;
  if (message.size() >= 4) std::memcpy(&magic, message.data(), 4);
  return magic == kLayerMagic;
}

Result<KvLayerMessage> decode_kv_layer(std::span<const uint8_t> message) {
  if (message.size() < kLayerHeaderBytes)
    return corrupt("KV layer message: {} bytes, shorter than its {}-byte header", message.size(), kLayerHeaderBytes);
  uint32_t h[5];
  std::memcpy(h, message.data(), sizeof(h));
  if (h[0] != kLayerMagic) return corrupt("KV layer message: bad magic {:#x}", h[0]);
  if (h[1] != uint32_t(kProtocolVersion))
    return corrupt("KV layer message: protocol version {} (this engine speaks {})", h[1], kProtocolVersion);
  if (h[3] == 0 || h[3] > 4096 || h[2] >= h[3])
    return corrupt("KV layer message: layer {} of {}", h[2], h[3]);
  if (h[4] == 0 || h[4] > kMaxLayerMessageBlocks) return corrupt("KV layer message: {} blocks", h[4]);
  const size_t keys_end = kLayerHeaderBytes + 32 * size_t(h[4]);
  if (message.size() < keys_end || (message.size() - keys_end) % h[4] != 0)
    return corrupt("KV layer message: {} bytes do not hold {} keys and equal slices", message.size(), h[4]);
  KvLayerMessage out;
  out.layer = int32_t(h[2]);
  out.num_layers = int32_t(h[3]);
  out.keys.resize(h[4]);
  for (size_t i = 0; i < out.keys.size(); ++i)
    std::memcpy(out.keys[i].data(), message.data() + kLayerHeaderBytes + 32 * i, 32);
  out.slices = message.subspan(keys_end);
  return out;
}

}  // namespace deepinfer::serve::pd
