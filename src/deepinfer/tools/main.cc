// deepinfer: the command-line entry point. Each subcommand lives in its own file and adds
// itself to the app here; exit status 0 done, 1 runtime error, 2 usage error.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

int main(int argc, char** argv) {
  using namespace deepinfer::tools;
  CLI::App app{"DeepInfer: LLM inference and serving engine (CPU)", "deepinfer"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  std::vector<Subcommand> subcommands = all_subcommands();
  std::function<int()> chosen;
  for (auto& sub : subcommands) {
    CLI::App* cmd = sub.add(app);
    cmd->callback([&chosen, run = sub.run] { chosen = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (!chosen) return kExitUsage;
  return chosen();
}
