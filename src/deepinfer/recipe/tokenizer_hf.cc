// Tokenizer::from_hf_dir: tokenizer.json (BPE model, pre_tokenizer, added_tokens) plus
// tokenizer_config.json (chat template, bos/eos, add_bos) and generation_config.json (eos list).
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "deepinfer/recipe/byte_level.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe {
namespace {

using nlohmann::json;

Result<json> read_json(const std::string& path, bool required) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (required) return not_found("{}: cannot open", path);
    return json();
  }
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("{}: not valid JSON", path);
  return j;
}

// "bos_token" in tokenizer_config.json is either a string or {"content": ...}.
std::string token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  return {};
}

Status check_normalizer(const json& n, const std::string& path) {
  if (n.is_null()) return Status::ok();
  std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : n.value("normalizers", json::array()))
      DI_RETURN_IF_ERROR(check_normalizer(sub, path));
    return Status::ok();
  }
  // NFC leaves already-composed text (nearly all real input) unchanged; we do not compose.
  if (type == "NFC") return Status::ok();
  return unsupported("{}: normalizer '{}' is not supported", path, type);
}

bool decoder_is_byte_level(const json& d) {
  if (!d.is_object()) return false;
  std::string type = d.value("type", "");
  if (type == "ByteLevel") return true;
  if (type == "Sequence")
    for (const auto& sub : d.value("decoders", json::array()))
      if (decoder_is_byte_level(sub)) return true;
  return false;
}

Status fill_from_tokenizer_json(const json& tj, const std::string& path, TokenizerSpec* spec,
                                std::map<std::string, int32_t>* added_by_text) {
  if (!tj.contains("model") || !tj["model"].is_object())
    return corrupt("{}: no model section", path);
  const json& model = tj["model"];
  if (model.value("type", "BPE") != "BPE")
    return unsupported("{}: model type '{}' is not supported (only BPE)", path,
                       model.value("type", ""));
  if (!decoder_is_byte_level(tj.value("decoder", json())))
    return unsupported("{}: only byte-level BPE (ByteLevel decoder) is supported", path);
  DI_RETURN_IF_ERROR(check_normalizer(tj.value("normalizer", json()), path));
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return corrupt("{}: model.vocab is missing", path);

  int64_t max_id = -1;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return corrupt("{}: vocab entry '{}' has a bad id", path, text);
    max_id = std::max(max_id, id.get<int64_t>());
  }
  const json added = tj.value("added_tokens", json::array());
  for (const auto& a : added) {
    if (!a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 ||
        a["id"].get<int64_t>() > (1 << 24) || !a.contains("content") || !a["content"].is_string())
      return corrupt("{}: malformed added_tokens entry", path);
    max_id = std::max(max_id, a["id"].get<int64_t>());
  }
  spec->token_bytes.assign(max_id + 1, std::string());
  for (const auto& [text, id] : model["vocab"].items())
    byte_level_decode(text, &spec->token_bytes[id.get<int64_t>()]);
  for (const auto& a : added) {
    auto id = static_cast<int32_t>(a["id"].get<int64_t>());
    spec->token_bytes[id] = a["content"].get<std::string>();
    spec->added.push_back({id, a.value("special", false), a.value("lstrip", false),
                           a.value("rstrip", false)});
    (*added_by_text)[a["content"].get<std::string>()] = id;
  }
  for (const auto& m : model.value("merges", json::array())) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m;
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return corrupt("{}: merge '{}' has no space", path, s);
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0];
      right = m[1];
    } else {
      return corrupt("{}: malformed merge entry", path);
    }
    std::string a, b;
    byte_level_decode(left, &a);
    byte_level_decode(right, &b);
    spec->merges.emplace_back(std::move(a), std::move(b));
  }
  spec->ignore_merges = model.value("ignore_merges", false);
  DI_ASSIGN_OR_RETURN(spec->pre, PreTokenizer::from_hf_json(tj.value("pre_tokenizer", json())));
  // A post-processor that starts every sequence with a special token means "add bos".
  const json pp = tj.value("post_processor", json());
  auto template_adds_bos = [](const json& p) {
    if (!p.is_object() || p.value("type", "") != "TemplateProcessing") return false;
    const json single = p.value("single", json::array());
    return !single.empty() && single[0].contains("SpecialToken");
  };
  if (template_adds_bos(pp)) spec->add_bos = true;
  if (pp.is_object() && pp.value("type", "") == "Sequence")
    for (const auto& sub : pp.value("processors", json::array()))
      if (template_adds_bos(sub)) spec->add_bos = true;
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) {
  const std::string tj_path = dir + "/tokenizer.json";
  DI_ASSIGN_OR_RETURN(json tj, read_json(tj_path, true));
  DI_ASSIGN_OR_RETURN(json cfg, read_json(dir + "/tokenizer_config.json", false));
  DI_ASSIGN_OR_RETURN(json gen, read_json(dir + "/generation_config.json", false));
  TokenizerSpec spec;
  std::map<std::string, int32_t> added_by_text;
  try {
    DI_RETURN_IF_ERROR(fill_from_tokenizer_json(tj, tj_path, &spec, &added_by_text));
  } catch (const json::exception& e) {
    return corrupt("{}: unexpected structure: {}", tj_path, e.what());
  }
  auto lookup = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    auto it = added_by_text.find(text);
    return it == added_by_text.end() ? -1 : it->second;
  };
  if (cfg.is_object()) {
    spec.bos_id = lookup(token_text(cfg.value("bos_token", json())));
    spec.eos_id = lookup(token_text(cfg.value("eos_token", json())));
    spec.unk_id = lookup(token_text(cfg.value("unk_token", json())));
    spec.pad_id = lookup(token_text(cfg.value("pad_token", json())));
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
      spec.add_bos = cfg["add_bos_token"].get<bool>();
    const json ct = cfg.value("chat_template", json());
    if (ct.is_string()) {
      spec.chat_template = ct;
    } else if (ct.is_array()) {  // named templates: use "default"
      for (const auto& t : ct)
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
            t["template"].is_string())
          spec.chat_template = t["template"];
    }
  }
  if (gen.is_object() && gen.contains("eos_token_id")) {
    const json& e = gen["eos_token_id"];
    if (e.is_number_integer()) spec.extra_eos.push_back(e.get<int32_t>());
    if (e.is_array())
      for (const auto& v : e)
        if (v.is_number_integer()) spec.extra_eos.push_back(v.get<int32_t>());
  }
  if (spec.add_bos && spec.bos_id < 0) spec.add_bos = false;
  auto result = Tokenizer::build(std::move(spec));
  if (!result.is_ok())
    return Status(result.status().code(), fmt::format("{}: {}", dir, result.status().message()));
  return result;
}

}  // namespace deepinfer::recipe
