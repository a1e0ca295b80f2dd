// The list of subcommands: each file defines one `Subcommand make_<name>_command()`.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

namespace deepinfer::tools {

struct Subcommand {
  // Adds the subcommand and its flags to `app` (flags bind to state the run function owns).
  std::function<CLI::App*(CLI::App& app)> add;
  std::function<int()> run;
};

Subcommand make_generate_command();
Subcommand make_chat_command();
Subcommand make_tokenize_command();
Subcommand make_detokenize_command();
Subcommand make_pull_command();
Subcommand make_bench_command();
Subcommand make_serve_command();
Subcommand make_kvstore_command();
Subcommand make_eplb_command();
Subcommand make_cluster_command();

inline std::vector<Subcommand> all_subcommands() {
  return {make_generate_command(), make_chat_command(), make_tokenize_command(),
          make_detokenize_command(), make_pull_command(), make_bench_command(),
          make_serve_command(), make_kvstore_command(), make_eplb_command(),
          make_cluster_command()};
}

}  // namespace deepinfer::tools
