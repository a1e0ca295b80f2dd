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

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/recipe/chat.h"
#include "deepinfer/tools/cli_common.h"

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

// One loaded model + engine. The mutex serializes Python threads sharing it; step() runs with
// the GIL released so other Python threads keep going during the forward pass.
class PyEngine {
 public:
  PyEngine(const std::string& model, int threads, int max_num_seqs, bool batch_invariant,
           bool prefix_caching) {
    tools::LoadedModel loaded = unwrap(tools::load_model_for_cli(model));
    name_ = loaded.name;
    tokenizer_ = loaded.tokenizer;
    if (threads < 0) throw py::value_error("threads must be >= 0");
    if (max_num_seqs < 1) throw py::value_error("max_num_seqs must be >= 1");
    tools::EngineFlags flags;
    flags.threads = threads;
    flags.max_num_seqs = max_num_seqs;
    flags.batch_invariant = batch_invariant;
    flags.prefix_caching = prefix_caching;
    engine_ = unwrap(tools::make_engine(loaded, flags));
  }

  int64_t add_request(std::vector<int32_t> prompt_ids, const py::dict& p) {
    engine::GenerationRequest r;
    r.prompt_ids = std::move(prompt_ids);
    auto& s = r.sampling;
    s.temperature = p["temperature"].cast<float>();
    s.top_p = p["top_p"].cast<float>();
    s.top_k = p["top_k"].cast<int>();
    s.min_p = p["min_p"].cast<float>();
    s.repetition_penalty = p["repetition_penalty"].cast<float>();
    s.frequency_penalty = p["frequency_penalty"].cast<float>();
    s.presence_penalty = p["presence_penalty"].cast<float>();
    if (!p["seed"].is_none()) {
      s.seed = p["seed"].cast<uint64_t>();
      s.has_seed = true;
    }
    s.logprobs = p["logprobs"].is_none() ? -1 : p["logprobs"].cast<int>();
    s.logit_bias = p["logit_bias"].cast<std::vector<std::pair<int32_t, float>>>();
    r.max_tokens = p["max_tokens"].cast<int>();
    r.stop = p["stop"].cast<std::vector<std::string>>();
    r.ignore_eos = p["ignore_eos"].cast<bool>();
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
  std::vector<int32_t> encode_chat(const std::vector<std::pair<std::string, std::string>>& msgs,
                                   bool add_generation_prompt) const {
    std::vector<recipe::ChatMessage> messages;
    for (const auto& [role, content] : msgs) messages.push_back({role, content});
    recipe::ChatOptions opts;
    opts.add_generation_prompt = add_generation_prompt;
    return unwrap(recipe::encode_chat(*tokenizer_, messages, opts));
  }
  std::string render_chat(const std::vector<std::pair<std::string, std::string>>& msgs,
                          bool add_generation_prompt) const {
    std::vector<recipe::ChatMessage> messages;
    for (const auto& [role, content] : msgs) messages.push_back({role, content});
    recipe::ChatOptions opts;
    opts.add_generation_prompt = add_generation_prompt;
    return unwrap(recipe::render_chat(*tokenizer_, messages, opts)).text.text;
  }

  const std::string& name() const { return name_; }
  const recipe::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::string name_;
  std::shared_ptr<const recipe::Tokenizer> tokenizer_;
  std::unique_ptr<engine::Engine> engine_;
  std::mutex mu_;
};

}  // namespace
}  // namespace deepinfer::python

PYBIND11_MODULE(_C, m) {
  using deepinfer::python::PyEngine;
  m.doc() = "DeepInfer engine bindings (use the deepinfer package, not this module)";
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const std::string&, int, int, bool, bool>(), py::arg("model"),
           py::arg("threads") = 0, py::arg("max_num_seqs") = 64,
           py::arg("batch_invariant") = false, py::arg("prefix_caching") = true)
      .def("add_request", &PyEngine::add_request, py::arg("prompt_ids"), py::arg("params"))
      .def("step", &PyEngine::step)
      .def("has_unfinished", &PyEngine::has_unfinished)
      .def("abort", &PyEngine::abort, py::arg("request_id"))
      .def("encode", &PyEngine::encode, py::arg("text"), py::arg("add_special_tokens") = true,
           py::arg("allow_special") = false)
      .def("decode", &PyEngine::decode, py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def("encode_chat", &PyEngine::encode_chat, py::arg("messages"),
           py::arg("add_generation_prompt") = true)
      .def("render_chat", &PyEngine::render_chat, py::arg("messages"),
           py::arg("add_generation_prompt") = true)
      .def_property_readonly("name", &PyEngine::name)
      .def_property_readonly("vocab_size", [](const PyEngine& e) { return e.tokenizer().vocab_size(); })
      .def_property_readonly("eos_token_id", [](const PyEngine& e) { return e.tokenizer().eos_id(); })
      .def_property_readonly("bos_token_id", [](const PyEngine& e) { return e.tokenizer().bos_id(); })
      .def_property_readonly("chat_template", [](const PyEngine& e) { return e.tokenizer().chat_template(); });
}
