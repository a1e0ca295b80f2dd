#include "deepinfer/serve/image_input.h"

#include "deepinfer/engine/image_request.h"
#include "deepinfer/vision/data_url.h"

namespace deepinfer::serve {

std::string image_bytes_from_base64(const std::string& data, const std::string& path) {
  Result<std::string> bytes = vision::bytes_from_base64(data, path);
  if (!bytes.is_ok()) bad_request(path, "{}", bytes.status().message());
  return std::move(*bytes);
}

std::string image_bytes_from_url(const std::string& url, const std::string& path) {
  Result<std::string> bytes = vision::bytes_from_data_url(url, path);
  if (!bytes.is_ok()) bad_request(path, "{}", bytes.status().message());
  return std::move(*bytes);
}

std::optional<std::string> read_image_part(const nlohmann::json& part, const std::string& type,
                                           const std::string& path) {
  using nlohmann::json;
  if (type == "image_url") {
    const json* iu = field(part, "image_url");
    if (iu == nullptr) bad_request(path + ".image_url", "'{}.image_url' is required", path);
    const std::string url = iu->is_string() ? iu->get<std::string>() : req_string(*iu, "url", path + ".image_url");
    if (iu->is_object()) {
      const std::string detail = opt_string(*iu, "detail", path + ".image_url").value_or("auto");
      if (detail != "auto" && detail != "low" && detail != "high")
        bad_request(path + ".image_url.detail", "'{}.image_url.detail' must be auto, low or high", path);
    }
    return image_bytes_from_url(url, path + ".image_url");
  }
  if (type == "input_image") {
    if (field(part, "file_id")) bad_request(path + ".file_id", "'{}.file_id': uploaded files are not supported; "
                                            "send the image as a data: URL in image_url", path);
    const std::string detail = opt_string(part, "detail", path).value_or("auto");
    if (detail != "auto" && detail != "low" && detail != "high")
      bad_request(path + ".detail", "'{}.detail' must be auto, low or high", path);
    return image_bytes_from_url(req_string(part, "image_url", path), path + ".image_url");
  }
  if (type == "image") {
    const json* src = field(part, "source");
    if (src == nullptr || !src->is_object()) bad_request(path + ".source", "{}.source: field required", path);
    const std::string st = req_string(*src, "type", path + ".source");
    if (st == "url")
      bad_request(path + ".source", "{}.source: remote image URLs are not fetched by this server; send a base64 source",
                  path);
    if (st != "base64") bad_request(path + ".source.type", "{}.source.type: must be 'base64', got '{}'", path, st);
    const std::string media = req_string(*src, "media_type", path + ".source");
    if (media != "image/jpeg" && media != "image/png" && media != "image/webp" && media != "image/gif")
      bad_request(path + ".source.media_type", "{}.source.media_type: '{}' is not an image type", path, media);
    return image_bytes_from_base64(req_string(*src, "data", path + ".source"), path + ".source.data");
  }
  return std::nullopt;
}

void add_text_part(recipe::ChatMessage& msg, const std::string& text) {
  msg.content += text;
  msg.parts.push_back({false, text});
}

void add_image_part(recipe::ChatMessage& msg, std::string bytes) { msg.parts.push_back({true, std::move(bytes)}); }

void drop_text_only_parts(recipe::ChatMessage& msg) {
  for (const recipe::ChatPart& p : msg.parts)
    if (p.image) return;
  msg.parts.clear();
}

void check_chat_images(const ServerContext& ctx, const ChatTurn& turn) {
  if (ctx.images != nullptr) return;
  for (const recipe::ChatMessage& m : turn.messages)
    if (!m.parts.empty())
      bad_request("messages", "model '{}' does not accept images (it has no vision encoder)", ctx.model_name);
}

void attach_chat_images(const ServerContext& ctx, const ChatTurn& turn, engine::GenerationRequest& request) {
  std::vector<const std::string*> images;
  for (const recipe::ChatMessage& m : turn.messages)
    for (const recipe::ChatPart& p : m.parts)
      if (p.image) images.push_back(&p.text);
  if (images.empty()) return;
  if (ctx.images == nullptr)
    bad_request("messages", "model '{}' does not accept images (it has no vision encoder)", ctx.model_name);
  const Status st = engine::add_prompt_images(*ctx.images, images, request);
  if (!st.is_ok()) throw ApiError(400, "messages", st.message());
}

}  // namespace deepinfer::serve
