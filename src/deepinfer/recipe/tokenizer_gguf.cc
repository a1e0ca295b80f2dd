// Tokenizer::from_gguf: reads the `tokenizer.ggml.*` metadata of a byte-level BPE model.
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/byte_level.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe {
namespace {

// llama.cpp token types.
constexpr int64_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const format::GgufFile& gguf) {
  const std::string& path = gguf.path();
  auto model = gguf.get_string("tokenizer.ggml.model");
  if (!model) return not_found("{}: no tokenizer.ggml.model in the metadata", path);
  if (*model != "gpt2")
    return unsupported("{}: tokenizer model '{}' is not supported (only byte-level BPE 'gpt2')",
                       path, *model);
  const auto* tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty())
    return corrupt("{}: tokenizer.ggml.tokens is missing or not a string array", path);
  const auto* types = gguf.get_int_array("tokenizer.ggml.token_type");
  if (types && types->size() != tokens->size())
    return corrupt("{}: tokenizer.ggml.token_type has {} entries for {} tokens", path,
                   types->size(), tokens->size());
  const auto* merges = gguf.get_string_array("tokenizer.ggml.merges");
  if (!merges) return corrupt("{}: tokenizer.ggml.merges is missing", path);

  TokenizerSpec spec;
  const size_t n = tokens->size();
  spec.token_bytes.resize(n);
  for (size_t id = 0; id < n; ++id) {
    int64_t type = types ? (*types)[id] : kTypeNormal;
    const std::string& text = (*tokens)[id];
    // Control and user-defined tokens are stored as their literal text; the others in the
    // GPT-2 byte alphabet.
    if (type == kTypeControl || type == kTypeUserDefined || type == kTypeUnknown) {
      spec.token_bytes[id] = text;
      if (!text.empty())
        spec.added.push_back({static_cast<int32_t>(id), type != kTypeUserDefined, false, false});
    } else {
      byte_level_decode(text, &spec.token_bytes[id]);
    }
  }
  spec.merges.reserve(merges->size());
  for (size_t r = 0; r < merges->size(); ++r) {
    const std::string& m = (*merges)[r];
    size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size())
      return corrupt("{}: merge #{} '{}' is not two tokens separated by a space", path, r, m);
    std::string a, b;
    byte_level_decode(std::string_view(m).substr(0, sp), &a);
    byte_level_decode(std::string_view(m).substr(sp + 1), &b);
    spec.merges.emplace_back(std::move(a), std::move(b));
  }
  std::string pre = gguf.get_string("tokenizer.ggml.pre").value_or("default");
  DI_ASSIGN_OR_RETURN(spec.pre, PreTokenizer::from_gguf_pre(pre));
  // Llama 3's tokenizer.json sets ignore_merges; llama.cpp does the same for this pre type.
  spec.ignore_merges = (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3");
  auto id_or = [&](const char* key) {
    auto v = gguf.get_int(key);
    return (v && *v >= 0 && *v < static_cast<int64_t>(n)) ? static_cast<int32_t>(*v) : -1;
  };
  spec.bos_id = id_or("tokenizer.ggml.bos_token_id");
  spec.eos_id = id_or("tokenizer.ggml.eos_token_id");
  spec.unk_id = id_or("tokenizer.ggml.unknown_token_id");
  spec.pad_id = id_or("tokenizer.ggml.padding_token_id");
  if (auto eot = id_or("tokenizer.ggml.eot_token_id"); eot >= 0) spec.extra_eos.push_back(eot);
  if (auto eom = id_or("tokenizer.ggml.eom_token_id"); eom >= 0) spec.extra_eos.push_back(eom);
  spec.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  spec.chat_template = gguf.get_string("tokenizer.chat_template").value_or("");
  auto result = Tokenizer::build(std::move(spec));
  if (!result.is_ok())
    return Status(result.status().code(), fmt::format("{}: {}", path, result.status().message()));
  return result;
}

}  // namespace deepinfer::recipe
