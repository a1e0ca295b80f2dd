// `deepinfer chat`: an interactive conversation in the terminal, streamed token by token.
// /reset starts over, /exit (or end of input) quits.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "deepinfer/recipe/chat.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct ChatFlags {
  EngineFlags engine;
  SamplingFlags sampling;
  std::string system;
};

int run_chat(ChatFlags& f) {
  auto loaded = load_model_for_cli(f.engine.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  auto tokenizer = loaded->tokenizer;
  const std::string arch = loaded->model->config().architecture;  // before make_engine takes the model
  auto eng = make_engine(*loaded, f.engine);
  if (!eng.is_ok()) return report_error(eng.status());
  engine::Engine& engine = **eng;
  const bool tty = isatty(STDIN_FILENO);
  std::vector<recipe::ChatMessage> history;
  if (!f.system.empty()) history.push_back({"system", f.system});
  if (tty) std::fprintf(stderr, "Chatting with %s. /reset starts over, /exit quits.\n", loaded->name.c_str());
  std::string line;
  for (;;) {
    if (tty) {
      std::fprintf(stderr, "> ");
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(f.system.empty() ? 0 : 1);
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    auto ids = recipe::encode_chat_for_model(*tokenizer, arch, history, recipe::ChatOptions{});
    if (!ids.is_ok()) return report_error(ids.status());
    engine::GenerationRequest req = make_request(f.sampling);
    req.prompt_ids = std::move(*ids);
    auto id = engine.add_request(req);
    if (!id.is_ok()) {
      std::fprintf(stderr, "deepinfer: %s\n", id.status().message().c_str());
      history.pop_back();
      continue;
    }
    std::string reply;
    while (engine.has_unfinished()) {
      for (const auto& out : engine.step()) {
        reply += out.new_text;
        std::fwrite(out.new_text.data(), 1, out.new_text.size(), stdout);
        std::fflush(stdout);
        if (out.finished && !out.error.empty()) std::fprintf(stderr, "\ndeepinfer: %s", out.error.c_str());
      }
    }
    std::printf("\n");
    std::fflush(stdout);
    history.push_back({"assistant", reply});
  }
  return kExitOk;
}

}  // namespace

Subcommand make_chat_command() {
  auto f = std::make_shared<ChatFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("chat", "Interactive chat in the terminal, streaming");
    add_engine_flags(*cmd, f->engine);
    add_sampling_flags(*cmd, f->sampling, engine::Defaults::kChat);
    cmd->add_option("--system", f->system, "System prompt");
    cmd->footer(
        "Samples by default (--temperature 0.7 --top-p 0.9, up to 512 tokens per reply): a "
        "conversation reads better varied, and greedy replies of small models loop; "
        "--temperature 0 for greedy. See docs/sampling.md.");
    return cmd;
  };
  s.run = [f] { return run_chat(*f); };
  return s;
}

}  // namespace deepinfer::tools
