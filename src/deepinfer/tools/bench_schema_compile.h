// `deepinfer bench --mode schema-compile`: how long the JSON Schema front end takes to build the
// grammar IR (no vocabulary, no mask precompute) for chosen schema files, repeated.
#pragma once

#include <string>

namespace deepinfer::tools {

struct SchemaCompileBenchOptions {
  std::string data;  // a schema file (JSONSchemaBench {"schema": ...} or a bare schema) or a directory of them
  int limit = 0;     // directory: at most this many files after sampling; 0 = all
  int stride = 1;    // directory: every stride-th file in name order
  int repeat = 20;   // compiles per file; the minimum and median are reported
};

// Prints one JSON line per file (min and median ms, runs, refusal message); returns the exit status.
int run_schema_compile_bench(const SchemaCompileBenchOptions& opts);

}  // namespace deepinfer::tools
