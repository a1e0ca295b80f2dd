// Image content parts of the three APIs, turned into prompt embeddings: data: URLs and base64
// sources decoded to bytes (remote http(s) URLs are refused: this server fetches nothing), then,
// once the chat template has placed one placeholder per image, the placeholders expanded and
// the images encoded through the model's vision encoder (vision/image_service.h).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/request.h"
#include "deepinfer/serve/chat_prompt.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {

// The bytes of an image given as a URL: "data:<media type>;base64,<data>" only. http(s) and
// other URLs are a 400 naming `path`.
std::string image_bytes_from_url(const std::string& url, const std::string& path);
// Standard base64 (padding optional, no whitespace inside) -> bytes; a 400 naming `path` when
// it is not base64.
std::string image_bytes_from_base64(const std::string& data, const std::string& path);

// The image of a content part, or nullopt when `part` (of type `type`) is not an image part:
//   Chat Completions: {"type": "image_url", "image_url": {"url": ..., "detail": ...}}
//   Responses:        {"type": "input_image", "image_url": ..., "detail": ...}
//   Anthropic:        {"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}
// Malformed image parts (and url / file sources) are 400s naming `path`.
std::optional<std::string> read_image_part(const nlohmann::json& part, const std::string& type,
                                           const std::string& path);
// Appends a text or image part to `msg` (text also extends msg.content).
void add_text_part(recipe::ChatMessage& msg, const std::string& text);
void add_image_part(recipe::ChatMessage& msg, std::string bytes);
// Clears msg.parts when none is an image (text-only messages keep a plain string content, which
// every template handles).
void drop_text_only_parts(recipe::ChatMessage& msg);

// Before encode_chat_turn: a 400 when the turn has images and the model takes none (so the
// error names the real problem, not the chat template's view of a list content).
void check_chat_images(const ServerContext& ctx, const ChatTurn& turn);

// After encode_chat_turn: when the turn's messages have image parts (in message and part order,
// the order the template places them), expands their placeholders in
// request.prompt_ids and fills request.images. 400s: a text-only model, too many images, an
// image that does not decode, a template that did not place every image.
void attach_chat_images(const ServerContext& ctx, const ChatTurn& turn, engine::GenerationRequest& request);

}  // namespace deepinfer::serve
