// `deepinfer pull NAME`: fetch a catalogue model into $DEEPINFER_HOME/models.
#include <cstdio>
#include <string>

#include "deepinfer/model/catalog.h"
#include "deepinfer/model/fetch.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct PullFlags {
  std::string name;
  bool force = false;
  bool if_missing = false;
  bool list = false;
};

int run_pull(const PullFlags& f) {
  if (f.list) {
    for (const auto& e : model::catalog())
      std::printf("%-28s %s\n", std::string(e.name).c_str(), std::string(e.file_name).c_str());
    return kExitOk;
  }
  if (f.name.empty()) return report_error(invalid_argument("pull: give a model name (see --list)"));
  const model::CatalogEntry* entry = model::find_catalog_entry(f.name);
  if (!entry) return report_error(invalid_argument("pull: '{}' is not in the catalogue (see --list)", f.name));
  model::PullOptions opts;
  opts.home = model::deepinfer_home();
  opts.force = f.force;
  opts.progress = !f.if_missing;
  auto path = model::pull_model(*entry, opts);
  if (!path.is_ok()) return report_error(path.status());
  if (!f.if_missing) std::printf("%s\n", path->c_str());
  return kExitOk;
}

}  // namespace

Subcommand make_pull_command() {
  auto f = std::make_shared<PullFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("pull", "Download a catalogue model into $DEEPINFER_HOME/models");
    cmd->add_option("name", f->name, "Catalogue name, e.g. smollm2-135m-instruct");
    cmd->add_flag("--force", f->force, "Download again even if a verified copy exists");
    cmd->add_flag("--if-missing", f->if_missing, "Quiet when the model is already there");
    cmd->add_flag("--list", f->list, "List the catalogue");
    return cmd;
  };
  s.run = [f] { return run_pull(*f); };
  return s;
}

}  // namespace deepinfer::tools
