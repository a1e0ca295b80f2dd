// See bench_spec.h. Greedy outputs are the same with and without speculation, so every
// configuration generates the same tokens and the times compare directly.
#include "deepinfer/tools/bench_spec.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/tools/bench_plot.h"

namespace deepinfer::tools {
namespace {

// A small file to edit: the model copies most of it back.
constexpr const char* kCode = R"(def load_orders(path):
    orders = []
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) != 4:
                continue
            order_id, customer, amount, status = fields
            orders.append({"id": order_id, "customer": customer,
                           "amount": float(amount), "status": status})
    return orders


def total_by_customer(orders):
    totals = {}
    for order in orders:
        if order["status"] != "paid":
            continue
        totals[order["customer"]] = totals.get(order["customer"], 0.0) + order["amount"]
    return totals
)";

// Chat questions with no text to copy: the n-gram drafter has little to go on, a draft model
// predicts the target's wording.
constexpr const char* kChat[] = {
    "What are three tips for staying focused while studying?",
    "Explain what a black hole is to a ten-year-old.",
    "Write a short, friendly email inviting a colleague to lunch on Friday.",
    "What is the difference between weather and climate?",
    "Give me a simple recipe for pancakes.",
    "Why is the sky blue?",
    "Suggest a name for a small coffee shop and explain why.",
    "How do I make a good first impression at a job interview?",
};

std::string task_prompt(const std::string& task, int i) {
  if (task == "chat") return kChat[i % 8];
  if (task == "code-edit") {
    const char* names[] = {"orders", "rows", "items", "records"};
    return fmt::format("Rename the variable `orders` to `{}` in this Python file and return the whole file:\n\n{}",
                       names[i % 4], kCode);
  }
  const char* people[] = {"Ana Lima", "Tom Berg", "Mei Chen", "Raj Patel"};
  return fmt::format(
      "Extract the fields name, email, phone, city and order number from this message into a JSON "
      "object.\n\nHello, this is {0}. My email is {1}@example.com and my phone is 555-01{2:02d}. I "
      "live in Porto and my order number is A-{3}. Please send the invoice to {1}@example.com.",
      people[i % 4], fmt::format("user{}", i), i % 100, 1000 + i);
}

struct Config {
  const char* name;
  std::string speculative;
  std::string policy;
};

Result<nlohmann::json> measure(const SpecBenchOptions& o, const Config& c, const std::string& task, int batch) {
  DI_ASSIGN_OR_RETURN(LoadedModel loaded, load_model_for_cli(o.engine.model));
  EngineFlags ef = o.engine;
  ef.enable_prefix_caching = false;
  ef.max_num_seqs = std::max(ef.max_num_seqs, batch);
  ef.speculative = c.speculative;
  ef.spec_policy = c.policy;
  if (!o.trace.empty() && !c.speculative.empty())
    ef.spec_trace = fmt::format("{}.{}.b{}.{}.jsonl", o.trace, task, batch, c.name);
  if (c.speculative != "draft") ef.draft_model.clear();
  else if (ef.draft_model.empty()) ef.draft_model = loaded.path;  // the model drafting for itself
  const std::string draft_path = ef.draft_model;
  DI_ASSIGN_OR_RETURN(auto eng, make_engine(loaded, ef));
  for (int i = 0; i < batch; ++i) {
    engine::GenerationRequest r;
    DI_ASSIGN_OR_RETURN(r.prompt_ids,
                        encode_prompt(*loaded.tokenizer, eng->model_config().architecture, task_prompt(task, i), true));
    r.max_tokens = o.gen_len;
    r.sampling.temperature = 0;
    if (!ef.spec_trace.empty()) r.sampling.logprobs = 0;  // the target's confidence, for the trace
    DI_RETURN_IF_ERROR(eng->add_request(r).status());
  }
  const double t0 = now_seconds();
  double window_start = 0;
  int64_t generated = 0, in_window = 0, steps_at = 0;
  engine::speculative::SpecStats spec_at;
  std::set<int64_t> started;
  while (eng->has_unfinished()) {
    for (const auto& out : eng->step()) {
      generated += static_cast<int64_t>(out.new_token_ids.size());
      if (window_start > 0) in_window += static_cast<int64_t>(out.new_token_ids.size());
      if (!out.new_token_ids.empty()) started.insert(out.request_id);
    }
    if (window_start == 0 && static_cast<int>(started.size()) >= batch) {
      // Decode from here on: every prompt is prefilled.
      window_start = now_seconds();
      steps_at = eng->stats().steps;
      if (eng->spec_stats()) spec_at = *eng->spec_stats();
    }
  }
  const double t1 = now_seconds();
  nlohmann::json j;
  j["mode"] = "spec";
  j["task"] = task;
  j["config"] = c.name;
  j["batch"] = batch;
  j["model"] = loaded.name;
  j["threads"] = eng->num_threads();
  j["generated_tokens"] = generated;
  j["tokens_per_s"] = window_start > 0 && t1 > window_start ? double(in_window) / (t1 - window_start) : 0.0;
  j["e2e_tokens_per_s"] = double(generated) / (t1 - t0);
  const int64_t steps = eng->stats().steps - steps_at;
  j["decode_steps"] = steps;
  j["tokens_per_step"] = steps > 0 ? double(in_window) / double(steps) : 0.0;
  if (const auto* sp = eng->spec_stats()) {
    const double s = steps > 0 ? double(steps) : 1.0;
    j["num_draft_tokens"] = ef.num_draft_tokens;
    j["drafter"] = c.speculative;
    if (c.speculative == "draft") j["draft_model"] = draft_path;
    j["draft_seconds"] = sp->draft_seconds - spec_at.draft_seconds;
    j["drafted_per_step"] = double(sp->drafted - spec_at.drafted) / s;
    j["verified_per_step"] = double(sp->verified - spec_at.verified) / s;
    j["accepted_per_step"] = double(sp->accepted - spec_at.accepted) / s;
    j["acceptance_rate"] = sp->verified > spec_at.verified
                               ? double(sp->accepted - spec_at.accepted) / double(sp->verified - spec_at.verified)
                               : 0.0;
  }
  return j;
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; !list.empty() && at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  const std::vector<std::string> all = {"code-edit", "json-extract", "chat"};
  std::vector<std::string> tasks = split_commas(o.tasks);
  for (const std::string& t : tasks)
    if (std::find(all.begin(), all.end(), t) == all.end())
      return report_error(
          invalid_argument("--spec-task {}: expected code-edit, json-extract or chat", t));
  if (tasks.empty()) tasks = all;
  std::vector<std::string> wanted = split_commas(o.configs);
  for (const std::string& c : wanted)
    if (c != "off" && c != "fixed" && c != "dspark")
      return report_error(invalid_argument("--spec-configs {}: expected off, fixed or dspark", c));
  if (!o.plot.empty() && !plot_format_supported(o.plot))
    return report_error(invalid_argument("--plot: '{}' must end in .png or .svg", o.plot));
  std::vector<nlohmann::json> rows;
  for (const std::string& task : tasks) {
    // The n-gram drafter on the repetitive tasks, the draft model on chat, unless --speculative
    // names one for every task (mtp on a model with an MTP layer).
    const std::string drafter = !o.engine.speculative.empty() ? o.engine.speculative
                                : task == "chat"                ? "draft"
                                                                : "ngram";
    const Config configs[] = {{"off", "", "fixed"}, {"fixed", drafter, "fixed"}, {"dspark", drafter, "dspark"}};
    for (int batch : o.batches) {
      for (const Config& c : configs) {
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.name) == wanted.end())
          continue;
        auto j = measure(o, c, task, batch);
        if (!j.is_ok()) return report_error(j.status());
        std::printf("%s\n", j->dump().c_str());
        std::fflush(stdout);
        rows.push_back(std::move(*j));
      }
    }
  }
  if (!o.plot.empty()) {
    if (Status st = write_spec_plot(o.plot, rows); !st.is_ok()) return report_error(st);
    std::fprintf(stderr, "wrote %s\n", o.plot.c_str());
  }
  return kExitOk;
}

}  // namespace deepinfer::tools
