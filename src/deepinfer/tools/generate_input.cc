#include "deepinfer/tools/generate_input.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/sampling_fields.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {
namespace {

// Reads the line's value of a JSONL field of the sampling table into `r` (absent or null: keep
// the default). The type and the table's range are checked here, naming the line.
Status read_field(const nlohmann::json& j, const engine::SamplingField& f, const std::string& where,
                  engine::GenerationRequest& r) {
  const std::string key(f.name);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  switch (f.type) {
    case engine::FieldType::kReal:
    case engine::FieldType::kInt: {
      if (f.type == engine::FieldType::kReal && !it->is_number())
        return invalid_argument("{}: field '{}' must be a number", where, key);
      if (f.type == engine::FieldType::kInt && !it->is_number_integer())
        return invalid_argument("{}: field '{}' must be an integer", where, key);
      // The range is checked before the value is stored: an int member cannot hold 1e300.
      const double v = it->get<double>();
      if (Status st = engine::check_sampling_value(f, v); !st.is_ok())
        return invalid_argument("{}: {}", where, st.message());
      if (f.type == engine::FieldType::kReal) f.set(r, v, 0);
      else f.set(r, 0, it->get<int64_t>());
      return Status::ok();
    }
    case engine::FieldType::kSeed:
      if (!it->is_number_integer()) return invalid_argument("{}: field '{}' must be an integer", where, key);
      f.set(r, 0, int64_t(it->get<uint64_t>()));
      return Status::ok();
    case engine::FieldType::kFlag:
      if (!it->is_boolean()) return invalid_argument("{}: field '{}' must be true or false", where, key);
      f.set(r, 0, it->get<bool>());
      return Status::ok();
  }
  return Status::ok();
}

}  // namespace

Result<engine::GenerationRequest> parse_generate_line(const nlohmann::json& j, const std::string& where,
                                                      const recipe::Tokenizer& tok,
                                                      std::string_view architecture,
                                                      const engine::GenerationRequest& defaults,
                                                      bool chat) {
  if (!j.is_object()) return invalid_argument("{}: expected a JSON object", where);
  engine::GenerationRequest r = defaults;
  if (auto it = j.find("prompt_token_ids"); it != j.end()) {
    if (!it->is_array()) return invalid_argument("{}: 'prompt_token_ids' must be an array", where);
    for (const auto& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok.vocab_size())
        return invalid_argument("{}: 'prompt_token_ids' holds {} which is not a token id", where, v.dump());
      r.prompt_ids.push_back(v.get<int32_t>());
    }
  } else if (auto it = j.find("messages"); it != j.end()) {
    if (!it->is_array()) return invalid_argument("{}: 'messages' must be an array", where);
    std::vector<recipe::ChatMessage> messages;
    for (const auto& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !m["content"].is_string())
        return invalid_argument("{}: each message needs string 'role' and 'content'", where);
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    auto ids = recipe::encode_chat_for_model(tok, architecture, messages, recipe::ChatOptions{});
    if (!ids.is_ok()) return invalid_argument("{}: {}", where, ids.status().message());
    r.prompt_ids = std::move(*ids);
  } else if (auto it = j.find("prompt"); it != j.end()) {
    if (!it->is_string()) return invalid_argument("{}: 'prompt' must be a string", where);
    DI_ASSIGN_OR_RETURN(r.prompt_ids, encode_prompt(tok, architecture, it->get<std::string>(), chat));
  } else {
    return invalid_argument("{}: needs 'prompt', 'messages' or 'prompt_token_ids'", where);
  }
  for (const engine::SamplingField& f : engine::sampling_fields())
    if (f.surfaces & engine::kJsonl) DI_RETURN_IF_ERROR(read_field(j, f, where, r));
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    r.stop.clear();
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return invalid_argument("{}: 'stop' must hold strings", where);
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return invalid_argument("{}: 'stop' must be a string or an array of strings", where);
    }
  }
  if (auto it = j.find("traffic_class"); it != j.end() && !it->is_null()) {
    r.traffic_class = it->is_string() ? kvstore::traffic_class_from_name(it->get<std::string>()) : std::nullopt;
    if (!r.traffic_class) return invalid_argument("{}: 'traffic_class' must be \"agent\" or \"chat\"", where);
  }
  if (auto it = j.find("swa_restore"); it != j.end() && !it->is_null()) {
    r.swa_restore = it->is_string() ? engine::swa_restore_from_name(it->get<std::string>()) : std::nullopt;
    if (!r.swa_restore) return invalid_argument("{}: 'swa_restore' must be \"bounded\" or \"exact\"", where);
  }
  if (r.max_tokens < 0) return invalid_argument("{}: 'max_tokens' must be >= 0", where);
  return r;
}

Result<std::vector<engine::GenerationRequest>> read_generate_input(
    const std::string& path, const recipe::Tokenizer& tok, std::string_view architecture,
    const engine::GenerationRequest& defaults, bool chat) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open", path);
  std::vector<engine::GenerationRequest> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return invalid_argument("{}: invalid JSON", where);
    DI_ASSIGN_OR_RETURN(auto r, parse_generate_line(j, where, tok, architecture, defaults, chat));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace deepinfer::tools
