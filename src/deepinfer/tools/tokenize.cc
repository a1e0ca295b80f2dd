// `deepinfer tokenize` and `deepinfer detokenize`: the model's tokenizer on its own.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/model_path.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

// Only the tokenizer: no weights are loaded.
Result<std::unique_ptr<recipe::Tokenizer>> load_tokenizer(const std::string& model_arg) {
  DI_ASSIGN_OR_RETURN(model::ResolvedModel resolved, model::resolve_model(model_arg));
  if (resolved.kind == model::ResolvedModel::Kind::kGguf) {
    DI_ASSIGN_OR_RETURN(auto gguf, format::GgufFile::open(resolved.path));
    return recipe::Tokenizer::from_gguf(*gguf);
  }
  return recipe::Tokenizer::from_hf_dir(resolved.path);
}

struct TokenizeFlags {
  std::string model;
  std::string text;
  bool special = false;
};

struct DetokenizeFlags {
  std::string model;
  std::vector<int64_t> ids;
};

}  // namespace

Subcommand make_tokenize_command() {
  auto f = std::make_shared<TokenizeFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of TEXT as {\"ids\": [...]}");
    cmd->add_option("--model,-m", f->model, "Model (file, directory or catalogue name)");
    cmd->add_option("text", f->text, "Text to tokenize")->required();
    cmd->add_flag("--special", f->special, "Parse control-token text (e.g. <|im_start|>) as control tokens");
    return cmd;
  };
  s.run = [f] {
    auto tok = load_tokenizer(f->model);
    if (!tok.is_ok()) return report_error(tok.status());
    nlohmann::json j;
    j["ids"] = (*tok)->encode(f->text, f->special);
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  };
  return s;
}

Subcommand make_detokenize_command() {
  auto f = std::make_shared<DetokenizeFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("detokenize", "Print the text of token IDs");
    cmd->add_option("--model,-m", f->model, "Model (file, directory or catalogue name)");
    cmd->add_option("ids", f->ids, "Token ids")->required();
    return cmd;
  };
  s.run = [f] {
    auto tok = load_tokenizer(f->model);
    if (!tok.is_ok()) return report_error(tok.status());
    std::vector<int32_t> ids;
    for (int64_t id : f->ids) {
      if (id < 0 || id >= (*tok)->vocab_size())
        return report_error(invalid_argument("token id {} is outside the vocabulary (size {})", id,
                                             (*tok)->vocab_size()));
      ids.push_back(static_cast<int32_t>(id));
    }
    std::string text = (*tok)->decode(ids);
    std::printf("%s\n", text.c_str());
    return kExitOk;
  };
  return s;
}

}  // namespace deepinfer::tools
