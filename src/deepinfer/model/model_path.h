// What `--model ARG` names: a .gguf file, a Hugging Face model directory, or a catalogue short
// name (resolved under $DEEPINFER_HOME/models). An empty ARG means the default model.
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::model {

struct ResolvedModel {
  enum Kind { kGguf, kHfDir };
  Kind kind = kGguf;
  std::string path;  // the .gguf file or the model directory
  std::string name;  // catalogue name, file stem or directory name: what the model is called
};

// Uses deepinfer_home() for catalogue names.
Result<ResolvedModel> resolve_model(std::string_view arg);
Result<ResolvedModel> resolve_model(std::string_view arg, const std::string& home);

}  // namespace deepinfer::model
