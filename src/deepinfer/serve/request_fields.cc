#include "deepinfer/serve/request_fields.h"

#include <cstdlib>

#include "deepinfer/engine/sampling_fields.h"
#include "deepinfer/structured/json_schema/json_depth.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/serve/api_error.h"

namespace deepinfer::serve {

using nlohmann::json;

void read_sampling(const json& body, engine::GenerationRequest& r) {
  using engine::FieldType;
  for (const engine::SamplingField& f : engine::sampling_fields()) {
    if (!(f.surfaces & engine::kHttp)) continue;
    const std::string key(f.name);
    switch (f.type) {
      case FieldType::kReal:
        if (auto v = opt_number(body, key.c_str(), "", f.min, f.http_max)) {
          if (f.min_exclusive && *v <= f.min)
            bad_request(key, "'{}' must be greater than {}, got {}", key, f.min, *v);
          f.set(r, *v, 0);
        }
        break;
      case FieldType::kInt:
      case FieldType::kSeed:
        if (auto v = opt_int(body, key.c_str(), "", f.type == FieldType::kSeed ? INT64_MIN : int64_t(f.min),
                             f.type == FieldType::kSeed ? INT64_MAX : int64_t(f.http_max)))
          f.set(r, 0, *v);
        break;
      case FieldType::kFlag:
        if (auto v = opt_bool(body, key.c_str(), "")) f.set(r, 0, *v);
        break;
    }
  }
}

void read_traffic_class(const json& body, const std::string& header_value, engine::GenerationRequest& r) {
  if (auto v = opt_string(body, "traffic_class", "")) {
    r.traffic_class = kvstore::traffic_class_from_name(*v);
    if (!r.traffic_class)
      bad_request("traffic_class", "'traffic_class' must be 'agent' or 'chat', got '{}'", *v);
    return;
  }
  if (header_value.empty()) return;
  r.traffic_class = kvstore::traffic_class_from_name(header_value);
  if (!r.traffic_class)
    bad_request("X-Traffic-Class", "header 'X-Traffic-Class' must be 'agent' or 'chat', got '{}'",
                header_value);
}

void read_swa_restore(const json& body, engine::GenerationRequest& r) {
  auto v = opt_string(body, "swa_restore", "");
  if (!v) return;
  r.swa_restore = engine::swa_restore_from_name(*v);
  if (!r.swa_restore)
    bad_request("swa_restore", "'swa_restore' must be 'bounded' or 'exact', got '{}'", *v);
}

void read_stop(const json& body, const char* key, engine::GenerationRequest& r) {
  const json* f = field(body, key);
  if (!f) return;
  if (f->is_string()) {
    if (!f->get<std::string>().empty()) r.stop.push_back(f->get<std::string>());
    return;
  }
  if (!f->is_array()) bad_request(key, "'{}' must be a string or a list of strings", key);
  if (f->size() > 16) bad_request(key, "'{}' has {} entries; at most 16 are allowed", key, f->size());
  for (size_t i = 0; i < f->size(); ++i) {
    const json& s = (*f)[i];
    if (!s.is_string()) bad_request(fmt::format("{}[{}]", key, i), "'{}[{}]' must be a string", key, i);
    if (s.get<std::string>().empty()) continue;
    r.stop.push_back(s.get<std::string>());
  }
}

void read_logit_bias(const json& body, int32_t vocab_size, engine::GenerationRequest& r) {
  const json* f = field(body, "logit_bias");
  if (!f) return;
  if (!f->is_object()) bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
  for (auto it = f->begin(); it != f->end(); ++it) {
    const std::string name = "logit_bias." + it.key();
    char* end = nullptr;
    const long id = std::strtol(it.key().c_str(), &end, 10);
    if (it.key().empty() || *end != '\0' || id < 0 || id >= vocab_size)
      bad_request(name, "'logit_bias' key '{}' is not a token id in [0, {})", it.key(), vocab_size);
    if (!it.value().is_number()) bad_request(name, "'{}' must be a number", name);
    const double b = it.value().get<double>();
    if (b < -100 || b > 100) bad_request(name, "'{}' must be between -100 and 100, got {}", name, b);
    r.sampling.logit_bias.emplace_back(int32_t(id), float(b));
  }
}

int read_max_tokens(const json& body, std::initializer_list<const char*> keys, int fallback) {
  for (const char* k : keys)
    if (auto v = opt_int(body, k, "", 1, 1 << 24)) return int(*v);  // 0 is refused, as OpenAI does
  return fallback;
}

structured::GrammarSpec json_schema_grammar(const json& schema, bool strict) {
  // Printing the schema recurses over it: a deeply nested one is refused first (issue 31).
  if (structured::json_nested_deeper_than(schema, structured::kMaxSchemaDepth))
    throw ApiError(400, "", fmt::format("the JSON Schema is nested more than {} levels deep",
                                        structured::kMaxSchemaDepth));
  structured::GrammarSpec g;
  g.kind = structured::GrammarSpec::kJsonSchema;
  g.source = schema.dump();
  g.opts.strict_properties = strict;
  // Compact JSON: with free whitespace a small model can pad with blanks until max_tokens.
  g.opts.any_whitespace = false;
  return g;
}

structured::GrammarSpec any_json_grammar() {
  structured::GrammarSpec g;
  g.kind = structured::GrammarSpec::kJsonObject;
  g.opts.any_whitespace = false;
  return g;
}

void read_response_format(const json& format, const std::string& param, bool responses_style,
                          engine::GenerationRequest& r) {
  if (!format.is_object()) bad_request(param, "'{}' must be an object", param);
  const std::string type = req_string(format, "type", param);
  if (type == "text") return;
  if (type == "json_object") {
    r.grammar = any_json_grammar();
    return;
  }
  if (type != "json_schema")
    bad_request(param + ".type", "'{}.type' must be 'text', 'json_object' or 'json_schema', got '{}'", param, type);
  const json* holder = &format;
  std::string holder_path = param;
  if (!responses_style) {
    holder = field(format, "json_schema");
    holder_path = param + ".json_schema";
    if (!holder || !holder->is_object()) bad_request(holder_path, "'{}' (an object) is required", holder_path);
  }
  const json* schema = field(*holder, "schema");
  if (!schema) bad_request(holder_path + ".schema", "'{}.schema' is required", holder_path);
  if (!schema->is_object() && !schema->is_boolean())
    bad_request(holder_path + ".schema", "'{}.schema' must be a JSON Schema object", holder_path);
  const bool strict = opt_bool(*holder, "strict", holder_path).value_or(false);
  r.grammar = json_schema_grammar(*schema, strict);
}

}  // namespace deepinfer::serve
