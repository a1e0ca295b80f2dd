// Reads `generate --input FILE.jsonl`: one request per line, as {"prompt": ...},
// {"messages": [...]} or {"prompt_token_ids": [...]}, with optional per-line sampling fields.
// A message's content may be a list of parts: {"type": "text", "text"}, {"type": "image",
// "path": FILE} or {"type": "image_url", "image_url": {"url": "data:..."}} (multimodal models,
// `images` set; docs/vision.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/vision/image_service.h"

namespace deepinfer::tools {

Result<std::vector<engine::GenerationRequest>> read_generate_input(
    const std::string& path, const recipe::Tokenizer& tok, std::string_view architecture,
    const engine::GenerationRequest& defaults,
    bool chat, vision::ImageService* images = nullptr);

// One line's JSON object -> a request (exposed for tests). `where` names the line in errors.
Result<engine::GenerationRequest> parse_generate_line(const nlohmann::json& j, const std::string& where,
                                                      const recipe::Tokenizer& tok,
                                                      std::string_view architecture,
                                                      const engine::GenerationRequest& defaults,
                                                      bool chat, vision::ImageService* images = nullptr);

}  // namespace deepinfer::tools
