#include "deepinfer/serve/image_input.h"

#include <array>

#include "deepinfer/engine/image_request.h"

namespace deepinfer::serve {

std::string image_bytes_from_base64(const std::string& data, const std::string& path) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  size_t n = data.size();
  while (n > 0 && data[n - 1] == '=') --n;
  if (data.size() - n > 2 || n % 4 == 1) bad_request(path, "'{}' is not valid base64 (bad length or padding)", path);
  std::string out;
  out.reserve(n * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = kValue[static_cast<uint8_t>(data[i])];
    if (v < 0) bad_request(path, "'{}' is not valid base64 (character {} at offset {})", path,
                           static_cast<int>(static_cast<uint8_t>(data[i])), i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

std::string image_bytes_from_url(const std::string& url, const std::string& path) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    bad_request(path, "'{}': remote image URLs are not fetched by this server; send the image inline as a "
                "data: URL (data:image/png;base64,...)", path);
  if (url.rfind("data:", 0) != 0)
    bad_request(path, "'{}' must be a data: URL (data:image/<type>;base64,...)", path);
  const size_t comma = url.find(',');
  if (comma == std::string::npos) bad_request(path, "'{}': the data: URL has no ',' before its data", path);
  const std::string meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0)
    bad_request(path, "'{}': only base64 data: URLs are accepted (data:image/<type>;base64,...)", path);
  return image_bytes_from_base64(url.substr(comma + 1), path);
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
