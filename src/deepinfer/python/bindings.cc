// The `deepinfer._C` extension: a thin pybind11 layer over engine::Engine and the tokenizer.
// Python-side conveniences (SamplingParams, LLM, RequestOutput) live in python/deepinfer/.
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "deepinfer/base/check.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/image_request.h"
#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/engine/sampling_fields.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/recipe/deepseek_v4_chat.h"
#include "deepinfer/vision/data_url.h"
#include "deepinfer/vision/image_service.h"

namespace py = pybind11;

namespace deepinfer::python {
namespace {

// Bad input (kInvalidArgument) becomes ValueError, a missing model FileNotFoundError, anything
// else RuntimeError; the C++ message is kept verbatim.
[[noreturn]] void raise(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument: throw py::value_error(st.message());
    case StatusCode::kNotFound: {
      PyErr_SetString(PyExc_FileNotFoundError, st.message().c_str());
      throw py::error_already_set();
    }
    default: throw std::runtime_error(st.message());
  }
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.is_ok()) raise(r.status());
  return std::move(*r);
}

// A chat prompt with images, ready for add_request: its token ids (each image's placeholder
// expanded) and the images' positions, hashes and embeddings.
struct ImagePrompt {
  std::vector<int32_t> prompt_ids;
  std::vector<engine::PromptImage> images;
  std::string text;  // the rendered chat prompt, one placeholder per image
};

// One message part from Python: ("text", text) | ("url", a data: URL) | ("bytes", encoded image).
using PyPart = std::pair<std::string, std::string>;
using PyMessage = std::pair<std::string, std::vector<PyPart>>;

// One loaded model + engine. The mutex serializes Python threads sharing it; step() runs with
// the GIL released so other Python threads keep going during the forward pass.
class PyEngine {
 public:
  PyEngine(const std::string& model, int threads, int max_num_seqs, bool batch_invariant,
           bool enable_prefix_caching, const std::string& kv_cache_dtype) {
    engine::LoadedModel loaded = unwrap(engine::load_model_with_tokenizer(model));
    name_ = loaded.name;
    architecture_ = loaded.model->config().architecture;
    tokenizer_ = loaded.tokenizer;
    if (threads < 0) throw py::value_error("threads must be >= 0");
    if (max_num_seqs < 1) throw py::value_error("max_num_seqs must be >= 1");
    engine::EngineConfig config;
    config.num_threads = threads;
    config.max_num_seqs = max_num_seqs;
    config.batch_invariant = batch_invariant;
    config.enable_prefix_caching = enable_prefix_caching;
    config.kv_cache_dtype = kv_cache_dtype;  // checked by Engine::create (ValueError)
    engine_ = unwrap(engine::Engine::create(std::move(loaded.model), tokenizer_, config));
    if (loaded.vision) {
      vision_pool_ = std::make_unique<ThreadPool>(threads);
      images_ = std::make_unique<vision::ImageService>(loaded.vision, vision_pool_.get());
    }
  }

  // A conversation whose messages are lists of parts (messages[i].content[j] in errors) through
  // the chat template, then its images decoded and encoded (the embedding cache keys them by the
  // SHA-256 of their bytes, as the server does). Bad input is a ValueError naming the part.
  ImagePrompt prepare_chat(const std::vector<PyMessage>& msgs, bool add_generation_prompt) {
    std::vector<recipe::ChatMessage> messages;
    for (size_t i = 0; i < msgs.size(); ++i) {
      recipe::ChatMessage msg{msgs[i].first, ""};
      for (size_t j = 0; j < msgs[i].second.size(); ++j) {
        const auto& [kind, payload] = msgs[i].second[j];
        const std::string where = "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]";
        if (kind == "text") {
          msg.content += payload;
          msg.parts.push_back({false, payload});
        } else if (kind == "url") {
          msg.parts.push_back({true, unwrap(vision::bytes_from_data_url(payload, where + ".image_url"))});
        } else if (kind == "bytes") {
          if (payload.empty()) throw py::value_error(where + ": the image is empty (0 bytes)");
          msg.parts.push_back({true, payload});
        } else {
          throw py::value_error(where + ": unknown part kind '" + kind + "'");
        }
      }
      bool has_image = false;
      for (const recipe::ChatPart& p : msg.parts) has_image = has_image || p.image;
      if (!has_image) msg.parts.clear();  // plain string content, which every template handles
      messages.push_back(std::move(msg));
    }
    std::vector<const std::string*> image_bytes;
    for (const auto& m : messages)
      for (const auto& p : m.parts)
        if (p.image) image_bytes.push_back(&p.text);
    if (!image_bytes.empty() && !images_)
      throw py::value_error("messages: " + name_ + " does not accept images (it has no vision encoder)");
    recipe::ChatOptions opts;
    opts.add_generation_prompt = add_generation_prompt;
    engine::GenerationRequest r;
    r.prompt_ids = unwrap(recipe::encode_chat_for_model(*tokenizer_, architecture_, messages, opts));
    if (!image_bytes.empty()) {
      Status st = Status::ok();
      {
        py::gil_scoped_release release;  // the vision tower runs here
        st = engine::add_prompt_images(*images_, image_bytes, r);
      }
      if (!st.is_ok()) raise(st);
    }
    ImagePrompt out{std::move(r.prompt_ids), std::move(r.images), {}};
    if (auto text = recipe::render_chat(*tokenizer_, messages, opts); text.is_ok()) out.text = text->text.text;
    return out;
  }

  // `p`: SamplingParams._to_engine(): the Python fields of engine/sampling_fields.h (None or
  // absent keeps the default), plus stop and logit_bias.
  int64_t add_request(std::vector<int32_t> prompt_ids, const py::dict& p, const ImagePrompt* images) {
    engine::GenerationRequest r = engine::default_request(engine::Defaults::kApi);
    r.prompt_ids = std::move(prompt_ids);
    if (images != nullptr) {
      if (images->prompt_ids != r.prompt_ids) throw py::value_error("prompt_ids differ from the image prompt's");
      r.images = images->images;
    }
    for (const engine::SamplingField& f : engine::sampling_fields()) {
      const py::str key(std::string(f.name));
      if (!(f.surfaces & engine::kPython) || !p.contains(key) || p[key].is_none()) continue;
      const py::handle v = p[key];
      switch (f.type) {
        case engine::FieldType::kReal: {
          const double x = v.cast<double>();
          if (Status st = engine::check_sampling_value(f, x); !st.is_ok()) raise(st);
          f.set(r, x, 0);
          break;
        }
        case engine::FieldType::kInt: {
          const int64_t x = v.cast<int64_t>();
          if (Status st = engine::check_sampling_value(f, double(x)); !st.is_ok()) raise(st);
          f.set(r, 0, x);
          break;
        }
        case engine::FieldType::kSeed: f.set(r, 0, int64_t(v.cast<uint64_t>())); break;
        case engine::FieldType::kFlag: f.set(r, 0, v.cast<bool>()); break;
      }
    }
    r.sampling.logit_bias = p["logit_bias"].cast<std::vector<std::pair<int32_t, float>>>();
    r.stop = p["stop"].cast<std::vector<std::string>>();
    std::lock_guard<std::mutex> lock(mu_);
    return unwrap(engine_->add_request(r));
  }

  // Returns one tuple per update: (request_id, new_token_ids, new_text, logprobs, finished,
  // finish_reason, error, prompt_tokens, completion_tokens, cached_tokens).
  py::list step() {
    std::vector<engine::RequestOutput> outs;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      outs = engine_->step();
    }
    py::list result;
    for (const auto& o : outs) {
      py::list lps;
      for (const auto& e : o.new_logprobs) lps.append(py::make_tuple(e.token_id, e.logprob, e.top));
      std::string reason = o.error.empty() ? std::string(engine::to_string(o.finish_reason)) : "error";
      result.append(py::make_tuple(o.request_id, o.new_token_ids,
                                   py::bytes(o.new_text).attr("decode")("utf-8", "replace"), lps,
                                   o.finished, reason, o.error, o.prompt_tokens,
                                   o.completion_tokens, o.cached_tokens));
    }
    return result;
  }

  bool has_unfinished() {
    std::lock_guard<std::mutex> lock(mu_);
    return engine_->has_unfinished();
  }
  void abort(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->abort(id);
  }

  std::vector<int32_t> encode(const std::string& text, bool add_special, bool allow_special) const {
    std::vector<int32_t> ids;
    if (add_special && tokenizer_->add_bos()) ids.push_back(tokenizer_->bos_id());
    std::vector<int32_t> body = tokenizer_->encode(text, allow_special);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }
  py::str decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::string s = tokenizer_->decode(ids, skip_special);
    return py::bytes(s).attr("decode")("utf-8", "replace");
  }
  // The model's own chat encoding, as `deepinfer generate` and the server use it: DeepSeek-V4's
  // native format (recipe/deepseek_v4_chat.h; `thinking` picks <think> or </think>), otherwise
  // the chat template or its built-in fallback.
  std::vector<int32_t> encode_chat(const std::vector<std::pair<std::string, std::string>>& msgs,
                                   bool add_generation_prompt, bool thinking) const {
    const std::vector<recipe::ChatMessage> messages = chat_messages(msgs);
    if (!recipe::uses_deepseek_v4_chat(architecture_)) {
      if (thinking) throw py::value_error("thinking: only DeepSeek-V4 models have a thinking mode");
      recipe::ChatOptions opts;
      opts.add_generation_prompt = add_generation_prompt;
      return unwrap(recipe::encode_chat(*tokenizer_, messages, opts));
    }
    recipe::DeepseekV4ChatOptions opts;
    opts.thinking = thinking;
    std::vector<int32_t> ids = unwrap(recipe::encode_deepseek_v4_chat(*tokenizer_, messages, opts));
    // V4's encoding always hands a final user turn to the assistant: <｜Assistant｜> then
    // <think> or </think>, two control tokens, dropped when no generation prompt is wanted.
    if (!add_generation_prompt && ends_with_v4_generation_prompt(msgs)) {
      const auto assistant = tokenizer_->special_token_id(kV4Assistant);
      const auto think = tokenizer_->special_token_id(thinking ? kV4ThinkOpen : kV4ThinkClose);
      DI_CHECK(ids.size() >= 2 && ids[ids.size() - 2] == assistant && ids.back() == think,
               "DeepSeek-V4 chat encoding does not end with the assistant prompt");
      ids.resize(ids.size() - 2);
    }
    return ids;
  }
  std::string render_chat(const std::vector<std::pair<std::string, std::string>>& msgs,
                          bool add_generation_prompt, bool thinking) const {
    const std::vector<recipe::ChatMessage> messages = chat_messages(msgs);
    if (!recipe::uses_deepseek_v4_chat(architecture_)) {
      if (thinking) throw py::value_error("thinking: only DeepSeek-V4 models have a thinking mode");
      recipe::ChatOptions opts;
      opts.add_generation_prompt = add_generation_prompt;
      return unwrap(recipe::render_chat(*tokenizer_, messages, opts)).text.text;
    }
    recipe::DeepseekV4ChatOptions opts;
    opts.thinking = thinking;
    std::string text = unwrap(recipe::render_deepseek_v4_chat(messages, opts)).text;
    if (!add_generation_prompt && ends_with_v4_generation_prompt(msgs)) {
      const std::string tail = std::string(kV4Assistant) + (thinking ? kV4ThinkOpen : kV4ThinkClose);
      if (text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0)
        text.resize(text.size() - tail.size());
    }
    return text;
  }

  const std::string& name() const { return name_; }
  bool accepts_images() const { return images_ != nullptr; }
  // (images encoded, embedding cache hits)
  std::pair<uint64_t, uint64_t> image_stats() const {
    if (!images_) return {0, 0};
    const vision::ImageServiceStats st = images_->stats();
    return {st.encoded, st.cache_hits};
  }
  const std::string& architecture() const { return architecture_; }
  const recipe::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  static constexpr const char* kV4Assistant = "<｜Assistant｜>";
  static constexpr const char* kV4ThinkOpen = "<think>";
  static constexpr const char* kV4ThinkClose = "</think>";

  static std::vector<recipe::ChatMessage> chat_messages(
      const std::vector<std::pair<std::string, std::string>>& msgs) {
    std::vector<recipe::ChatMessage> messages;
    for (const auto& [role, content] : msgs) messages.push_back({role, content});
    return messages;
  }
  // Whether V4's encoding ends these messages with the assistant prompt (the last turn is a
  // user, developer or tool turn).
  static bool ends_with_v4_generation_prompt(
      const std::vector<std::pair<std::string, std::string>>& msgs) {
    return !msgs.empty() && msgs.back().first != "assistant" && msgs.back().first != "system";
  }

  std::string name_;
  std::string architecture_;
  std::shared_ptr<const recipe::Tokenizer> tokenizer_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ThreadPool> vision_pool_;          // multimodal models only
  std::unique_ptr<vision::ImageService> images_;     // multimodal models only
  std::mutex mu_;
};

}  // namespace
}  // namespace deepinfer::python

PYBIND11_MODULE(_C, m) {
  using deepinfer::python::PyEngine;
  m.doc() = "DeepInfer engine bindings (use the deepinfer package, not this module)";
  // The sampling table (engine/sampling_fields.h): SamplingParams takes its defaults from it.
  m.def("sampling_fields", [] {
    py::list out;
    for (const deepinfer::engine::SamplingField& f : deepinfer::engine::sampling_fields()) {
      if (!(f.surfaces & deepinfer::engine::kPython)) continue;
      py::dict d;
      d["name"] = std::string(f.name);
      const double def = f.defaults[int(deepinfer::engine::Defaults::kApi)];
      switch (f.type) {
        case deepinfer::engine::FieldType::kReal: d["default"] = def; break;
        case deepinfer::engine::FieldType::kInt:
          d["default"] = f.has_off && def == f.off ? py::object(py::none()) : py::object(py::int_(int64_t(def)));
          break;
        case deepinfer::engine::FieldType::kSeed: d["default"] = py::none(); break;
        case deepinfer::engine::FieldType::kFlag: d["default"] = def != 0; break;
      }
      d["min"] = f.min;
      d["max"] = f.max;
      d["help"] = std::string(f.help);
      out.append(d);
    }
    return out;
  });
  using deepinfer::python::ImagePrompt;
  py::class_<ImagePrompt>(m, "ImagePrompt")
      .def_readonly("prompt_ids", &ImagePrompt::prompt_ids)
      .def_readonly("text", &ImagePrompt::text)
      .def_property_readonly("num_images", [](const ImagePrompt& p) { return p.images.size(); });
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const std::string&, int, int, bool, bool, const std::string&>(), py::arg("model"),
           py::arg("threads") = 0, py::arg("max_num_seqs") = 64,
           py::arg("batch_invariant") = false, py::arg("enable_prefix_caching") = true,
           py::arg("kv_cache_dtype") = "auto")
      .def("add_request", &PyEngine::add_request, py::arg("prompt_ids"), py::arg("params"),
           py::arg("images") = nullptr)
      .def("prepare_chat", &PyEngine::prepare_chat, py::arg("messages"), py::arg("add_generation_prompt") = true)
      .def_property_readonly("accepts_images", &PyEngine::accepts_images)
      .def_property_readonly("image_stats", &PyEngine::image_stats)
      .def("step", &PyEngine::step)
      .def("has_unfinished", &PyEngine::has_unfinished)
      .def("abort", &PyEngine::abort, py::arg("request_id"))
      .def("encode", &PyEngine::encode, py::arg("text"), py::arg("add_special_tokens") = true,
           py::arg("allow_special") = false)
      .def("decode", &PyEngine::decode, py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def("encode_chat", &PyEngine::encode_chat, py::arg("messages"),
           py::arg("add_generation_prompt") = true, py::arg("thinking") = false)
      .def("render_chat", &PyEngine::render_chat, py::arg("messages"),
           py::arg("add_generation_prompt") = true, py::arg("thinking") = false)
      .def_property_readonly("name", &PyEngine::name)
      .def_property_readonly("architecture", &PyEngine::architecture)
      .def_property_readonly("vocab_size", [](const PyEngine& e) { return e.tokenizer().vocab_size(); })
      .def_property_readonly("eos_token_id", [](const PyEngine& e) { return e.tokenizer().eos_id(); })
      .def_property_readonly("bos_token_id", [](const PyEngine& e) { return e.tokenizer().bos_id(); })
      .def_property_readonly("chat_template", [](const PyEngine& e) { return e.tokenizer().chat_template(); });
}
