// What every route handler sees: the engine loop, the served model's name and limits, the
// stored responses (for previous_response_id), and the HTTP helpers all handlers share.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/engine/request.h"
#include "deepinfer/serve/api_error.h"
#include "deepinfer/serve/request_backend.h"

namespace deepinfer::vision {
class ImageService;
}

namespace httplib {
struct DataSink;
}

namespace deepinfer::serve {

class ResponseStore;

struct ServerContext {
  RequestBackend* loop = nullptr;  // the engine loop, or the entrypoint's disaggregated backend
  std::string model_name;       // the name clients use (--served-model-name)
  int64_t max_model_len = 0;    // prompt + output tokens a sequence may hold
  int64_t created_unix = 0;     // when the server started (for /v1/models)
  ResponseStore* responses = nullptr;
  vision::ImageService* images = nullptr;  // multimodal models only (serve/image_input.h)
  // Responses being made (handlers running, generation replies being written); a stop lets
  // them end before it closes the connections. Null: not counted.
  std::atomic<int>* in_progress = nullptr;
};

// Counts one response in ServerContext::in_progress while alive.
class InProgress {
 public:
  explicit InProgress(std::atomic<int>* count) : count_(count) {
    if (count_) count_->fetch_add(1);
  }
  ~InProgress() {
    if (count_) count_->fetch_sub(1);
  }
  InProgress(const InProgress&) = delete;
  InProgress& operator=(const InProgress&) = delete;

 private:
  std::atomic<int>* count_;
};

// JSON text of a response body; invalid UTF-8 (a token cut mid-character) is replaced, never
// thrown on.
std::string dump_json(const nlohmann::json& j);
// Parses a request body: a 400 naming the position when it is not UTF-8 or not a JSON object.
nlohmann::json parse_body(const std::string& body);
// The offset of the first byte that does not start a valid UTF-8 sequence, or npos.
size_t first_invalid_utf8(std::string_view s);
// Checks "model" (required, as in both APIs): it must name the served model. Returns the name.
std::string check_model(const ServerContext& ctx, const nlohmann::json& body);
// A fresh id like "chatcmpl-1a2b3c..." (random hex).
std::string make_id(const std::string& prefix);
int64_t unix_now();

// One finished generation, gathered from a request's stream.
struct Completion {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<engine::LogprobEntry> logprobs;
  std::vector<engine::LogprobEntry> prompt_logprobs;  // GenerationRequest::prompt_logprobs
  engine::FinishReason finish_reason = engine::FinishReason::kNone;
  std::string matched_stop;  // the stop string that ended it, when one did
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  int replayed_tokens = 0;
};

// Fails with a 400 naming `param` when prompt + max_tokens exceeds the model's context (an
// explicit max_tokens: OpenAI refuses it; kUntilContextEnd is clamped by the engine).
void check_length(const ServerContext& ctx, const engine::GenerationRequest& request,
                  const std::string& param);

// The ApiError for a request the engine ended with `error`.
ApiError generation_error(const engine::GenerationRequest& request, bool before_first_token,
                          const std::string& error);
// A request that failed after it began: 503 when the server lacks a part of itself
// (kServiceUnavailable), else 500.
ApiError failed_generation(const std::string& error);

// Streams of several requests read together (n > 1): next() returns the index of the request
// that produced `out`, or -1 when all have finished. Throws ApiError when a submit fails.
class StreamGroup {
 public:
  StreamGroup(const ServerContext& ctx, const std::vector<engine::GenerationRequest>& requests);
  ~StreamGroup();  // cancels whatever is still running
  // Waits up to `timeout` for an output; -2 on timeout, -1 when every stream has finished.
  int next(engine::RequestOutput& out, std::chrono::milliseconds timeout);
  void cancel_all();
  // The stop string that ended request i (after its final output), or "".
  std::string matched_stop(int i) const;

 private:
  const ServerContext& ctx_;
  InProgress in_progress_;  // until the reply's last write (the stream's owner drops the group)
  std::vector<engine::GenerationRequest> requests_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<bool> done_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<std::string> texts_;
  size_t cursor_ = 0;
};

// Which stop string ended a generation: the one the full decode of `token_ids` holds right
// after `text` (the engine strips it from the text). "" when none.
std::string find_matched_stop(const recipe::Tokenizer& tok, const std::vector<int32_t>& token_ids,
                              const std::string& text, const std::vector<std::string>& stops);

// Server-sent events on a chunked response; each write returns false once the client is gone.
class SseWriter {
 public:
  explicit SseWriter(httplib::DataSink& sink) : sink_(sink) {}
  bool data(const nlohmann::json& j);                            // "data: {...}\n\n"
  bool event(const std::string& name, const nlohmann::json& j);  // "event: x\ndata: {...}\n\n"
  bool raw(const std::string& text);
  bool comment();  // ": keep-alive\n\n", sent while waiting so a closed client is noticed
  void done();     // ends the chunked body

 private:
  httplib::DataSink& sink_;
};

}  // namespace deepinfer::serve
