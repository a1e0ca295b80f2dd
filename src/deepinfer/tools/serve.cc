// `deepinfer serve`: the HTTP server is not part of this build yet; say so clearly.
#include <string>

#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {

Subcommand make_serve_command() {
  auto model = std::make_shared<std::string>();
  Subcommand s;
  s.add = [model](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("serve", "OpenAI/Anthropic-compatible HTTP server (not built yet)");
    cmd->add_option("--model,-m", *model, "Model (file, directory or catalogue name)");
    cmd->allow_extras();
    return cmd;
  };
  s.run = [] {
    return report_error(unsupported(
        "serve: the HTTP server is not available in this build yet; use 'deepinfer generate' or "
        "'deepinfer chat'"));
  };
  return s;
}

}  // namespace deepinfer::tools
