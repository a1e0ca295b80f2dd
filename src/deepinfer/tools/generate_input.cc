#include "deepinfer/tools/generate_input.h"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/image_request.h"
#include "deepinfer/engine/sampling_fields.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/serve/image_input.h"
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

// Text and image parts of one message; text-only part lists become plain content.
Status read_content_parts(const nlohmann::json& parts, const std::string& where, recipe::ChatMessage& msg) {
  bool has_image = false;
  for (const auto& p : parts) {
    const std::string type = p.is_object() ? p.value("type", std::string()) : std::string();
    if (type == "text" && p.contains("text") && p["text"].is_string()) {
      msg.content += p["text"].get<std::string>();
      msg.parts.push_back({false, p["text"].get<std::string>()});
    } else if (type == "image" && p.contains("path") && p["path"].is_string()) {
      std::ifstream in(p["path"].get<std::string>(), std::ios::binary);
      if (!in) return not_found("{}: cannot read image file '{}'", where, p["path"].get<std::string>());
      msg.parts.push_back({true, std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())});
      has_image = true;
    } else if (type == "image_url" && p.contains("image_url")) {
      const nlohmann::json& iu = p["image_url"];
      const std::string url = iu.is_string() ? iu.get<std::string>() : iu.value("url", std::string());
      try {
        msg.parts.push_back({true, serve::image_bytes_from_url(url, "image_url")});
      } catch (const serve::ApiError& e) {
        return invalid_argument("{}: {}", where, e.what());
      }
      has_image = true;
    } else {
      return invalid_argument("{}: a content part must be {{\"type\": \"text\", \"text\"}}, {{\"type\": \"image\", "
                              "\"path\"}} or {{\"type\": \"image_url\", \"image_url\": {{\"url\"}}}}", where);
    }
  }
  if (!has_image) msg.parts.clear();
  return Status::ok();
}

}  // namespace

Result<engine::GenerationRequest> parse_generate_line(const nlohmann::json& j, const std::string& where,
                                                      const recipe::Tokenizer& tok,
                                                      std::string_view architecture,
                                                      const engine::GenerationRequest& defaults,
                                                      bool chat, vision::ImageService* images) {
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
    std::vector<const std::string*> image_bytes;
    for (const auto& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
          !(m["content"].is_string() || m["content"].is_array()))
        return invalid_argument("{}: each message needs string 'role' and 'content' (a string or a list of parts)",
                                where);
      recipe::ChatMessage msg{m["role"].get<std::string>(), ""};
      if (m["content"].is_string()) {
        msg.content = m["content"].get<std::string>();
      } else {
        DI_RETURN_IF_ERROR(read_content_parts(m["content"], where, msg));
      }
      messages.push_back(std::move(msg));
    }
    for (const auto& m : messages)
      for (const auto& p : m.parts)
        if (p.image) image_bytes.push_back(&p.text);
    if (!image_bytes.empty() && images == nullptr)
      return invalid_argument("{}: this model does not accept images (it has no vision encoder)", where);
    auto ids = recipe::encode_chat_for_model(tok, architecture, messages, recipe::ChatOptions{});
    if (!ids.is_ok()) return invalid_argument("{}: {}", where, ids.status().message());
    r.prompt_ids = std::move(*ids);
    if (!image_bytes.empty()) {
      const Status st = engine::add_prompt_images(*images, image_bytes, r);
      if (!st.is_ok()) return invalid_argument("{}: {}", where, st.message());
    }
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
    const engine::GenerationRequest& defaults, bool chat, vision::ImageService* images) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open", path);
  std::vector<engine::GenerationRequest> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return invalid_argument("{}: invalid JSON", where);
    DI_ASSIGN_OR_RETURN(auto r, parse_generate_line(j, where, tok, architecture, defaults, chat, images));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace deepinfer::tools
