// Phases, each --repeat times, on one chat prompt "Request <nonce>." <image> "Describe the
// picture." (the nonce before the image, so a new nonce shares no block with earlier prompts
// past the chat header):
//   encode                 : the image through ImageService with no cache (decode + preprocess +
//                            tower + projector), 4 x repeat times: images/s;
//   text_only              : the same prompt without the image (a fresh nonce each time, so no
//                            prefix hit): the TTFT an image adds to;
//   image_cold             : a fresh nonce, an empty embedding cache: encode + full prefill;
//   image_embedding_cached : a fresh nonce, the image's embeddings cached: full prefill only;
//   image_prefix_cached    : the previous prompt again: the prefix cache serves the KV through
//                            the image (keyed by its content hash), only the tail is prefilled.
// TTFT counts from the request's arrival (before the image is encoded) to its first token; each
// phase reports the median and the minimum of its runs (the machine may be shared).
#include "deepinfer/tools/bench_vision.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include <nlohmann/json.hpp>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/engine/image_request.h"
#include "deepinfer/recipe/chat.h"

namespace deepinfer::tools {
namespace {

struct Ttft {
  double ms = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;
};

// One chat turn, with the image or without, through the image service and the engine.
Result<Ttft> run_turn(engine::Engine& e, const LoadedModel& m, vision::ImageService& images,
                      const std::string& bytes, int nonce, bool with_image) {
  const std::string head = "Request " + std::to_string(nonce) + ".", tail = " Describe the picture.";
  recipe::ChatMessage msg{"user", head + tail};
  if (with_image) msg.parts = {{false, head}, {true, bytes}, {false, tail}};
  const double t0 = now_seconds();
  engine::GenerationRequest r;
  r.max_tokens = 1;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  DI_ASSIGN_OR_RETURN(r.prompt_ids, recipe::encode_chat_for_model(*m.tokenizer, e.model_config().architecture,
                                                                  {msg}, recipe::ChatOptions{}));
  if (with_image) DI_RETURN_IF_ERROR(engine::add_prompt_images(images, {&msg.parts[1].text}, r));
  Ttft out;
  out.prompt_tokens = static_cast<int>(r.prompt_ids.size());
  DI_ASSIGN_OR_RETURN(auto id, e.add_request(r));
  (void)id;
  bool first = true;
  while (e.has_unfinished())
    for (const engine::RequestOutput& o : e.step()) {
      if (first && !o.new_token_ids.empty()) {
        out.ms = (now_seconds() - t0) * 1e3;
        first = false;
      }
      if (o.finished && !o.error.empty()) return Status(StatusCode::kInternal, o.error);
      if (o.finished) out.cached_tokens = o.cached_tokens;
    }
  return out;
}

void print_phase(const char* phase, const std::vector<Ttft>& runs, int threads) {
  std::vector<double> ms;
  for (const Ttft& t : runs) ms.push_back(t.ms);
  std::sort(ms.begin(), ms.end());
  const Ttft& last = runs.back();
  nlohmann::json j = {{"mode", "vision"}, {"phase", phase}, {"batch", 1},
                      {"prompt_tokens", last.prompt_tokens}, {"cached_tokens", last.cached_tokens},
                      {"ttft_ms", ms[ms.size() / 2]}, {"ttft_ms_min", ms.front()}, {"runs", runs.size()},
                      {"threads", threads}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int run_vision_bench(const VisionBenchOptions& opts) {
  if (opts.image.empty())
    return report_error(invalid_argument("bench --mode vision: needs --image FILE (a JPEG, PNG or WebP image)"));
  std::ifstream in(opts.image, std::ios::binary);
  if (!in) return report_error(not_found("bench --mode vision: cannot read --image '{}'", opts.image));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EngineFlags ef = opts.engine;
  ef.enable_prefix_caching = true;
  auto loaded = load_model_for_cli(ef.model);
  if (!loaded.is_ok()) return report_error(loaded.status());
  if (!loaded->vision)
    return report_error(unsupported("bench --mode vision: {} has no vision encoder (a LLaVA-layout model is needed)",
                                    ef.model));
  const std::shared_ptr<const vision::VisionEncoder> encoder = loaded->vision;
  ThreadPool pool(ef.threads);
  vision::ImageServiceOptions uncached;
  uncached.cache_entries = 0;
  vision::ImageService no_cache(encoder, &pool, uncached);
  const int encodes = 4 * opts.repeat;
  if (Result<vision::EncodedImage> w = no_cache.encode(bytes); !w.is_ok()) return report_error(w.status());
  const double t0 = now_seconds();
  for (int i = 0; i < encodes; ++i)
    if (Result<vision::EncodedImage> r = no_cache.encode(bytes); !r.is_ok()) return report_error(r.status());
  const double secs = now_seconds() - t0;
  nlohmann::json enc = {{"mode", "vision"}, {"phase", "encode"}, {"batch", 1},
                        {"images", encodes}, {"images_per_s", encodes / secs},
                        {"ms_per_image", secs * 1e3 / encodes}, {"tokens_per_image", encoder->tokens_per_image()},
                        {"threads", pool.num_threads()}};
  std::printf("%s\n", enc.dump().c_str());
  std::fflush(stdout);

  auto eng = make_engine(*loaded, ef);
  if (!eng.is_ok()) return report_error(eng.status());
  engine::Engine& e = **eng;
  int nonce = 1000;
  for (bool image : {false, true})  // warm-up
    if (auto w = run_turn(e, *loaded, no_cache, bytes, nonce++, image); !w.is_ok()) return report_error(w.status());
  std::vector<Ttft> text, cold, embedded, prefixed;
  for (int rep = 0; rep < opts.repeat; ++rep) {
    vision::ImageService fresh(encoder, &pool);  // an empty embedding cache
    auto add = [&](std::vector<Ttft>& into, int n, bool image) -> Status {
      DI_ASSIGN_OR_RETURN(Ttft t, run_turn(e, *loaded, fresh, bytes, n, image));
      into.push_back(t);
      return Status::ok();
    };
    Status st = add(text, nonce++, false);
    if (st.is_ok()) st = add(cold, nonce++, true);
    if (st.is_ok()) st = add(embedded, nonce++, true);
    if (st.is_ok()) st = add(prefixed, nonce - 1, true);
    if (!st.is_ok()) return report_error(st);
  }
  print_phase("text_only", text, e.num_threads());
  print_phase("image_cold", cold, e.num_threads());
  print_phase("image_embedding_cached", embedded, e.num_threads());
  print_phase("image_prefix_cached", prefixed, e.num_threads());
  return kExitOk;
}

}  // namespace deepinfer::tools
