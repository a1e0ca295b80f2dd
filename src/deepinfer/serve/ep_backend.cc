#include "deepinfer/serve/ep_backend.h"

#include <algorithm>

#include "deepinfer/base/log.h"
#include "deepinfer/parallel/ep_liveness.h"
#include "deepinfer/serve/ep_rebalance_metrics.h"

namespace deepinfer::serve {

using Clock = std::chrono::steady_clock;

EpBackend::EpBackend(std::unique_ptr<engine::Engine> engine, parallel::EpGroup& group,
                     parallel::EpLiveness* liveness, int max_queued_requests,
                     const parallel::RebalanceOptions& rebalance)
    : engine_(std::move(engine)), group_(group), liveness_(liveness), rank_(*engine_, group),
      max_queued_(max_queued_requests), load_(group.size()), rebalancer_(rebalance, group.placement()),
      in_flight_(size_t(group.size()), 0) {
  thread_ = std::thread([this] { run(); });
}

EpBackend::~EpBackend() { shutdown(); }

Result<std::shared_ptr<RequestStream>> EpBackend::submit(const engine::GenerationRequest& request) {
  if (!request.images.empty())
    return unsupported("image inputs are not carried between expert-parallel ranks yet");
  std::promise<Status> accepted;
  std::future<Status> result = accepted.get_future();
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) return resource_exhausted("{}", failure_);
    if (stopping_) return resource_exhausted("the server is shutting down");
    if (queued_ >= max_queued_)
      return resource_exhausted("the server's request queue is full ({} requests); retry later", max_queued_);
    // The rank with the fewest requests in flight (the lowest on a tie).
    const int rank = int(std::min_element(in_flight_.begin(), in_flight_.end()) - in_flight_.begin());
    const int64_t id = next_id_++;
    stream = new_stream(this, id);
    queued_ += 1;
    in_flight_[size_t(rank)] += 1;
    pending_.push_back(ep::Assignment{id, rank, request});
    waiting_[id] = Waiter{stream, &accepted, rank};
  }
  cv_.notify_all();
  Status status = result.get();
  if (!status.is_ok()) return status;
  return stream;
}

void EpBackend::request_abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_all();
}

void EpBackend::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // After a lost rank the loop may wait forever in a collective with it: give it a moment to
  // notice (when it was idle it returns at once), else leave it behind; the process exits soon.
  for (int i = 0; i < 100 && failed() && !loop_done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (failed() && !loop_done_)
    thread_.detach();
  else
    thread_.join();
}

bool EpBackend::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !failure_.empty();
}

bool EpBackend::ready(std::string& why) const {
  std::lock_guard<std::mutex> lock(mu_);
  why = failure_;
  return failure_.empty();
}

EngineGauges EpBackend::gauges() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineGauges g = gauges_;
  g.in_flight = queued_;
  return g;
}

void EpBackend::rank_lost(int rank, const std::string& why) {
  load_.set_lost(rank);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) return;
    failure_ = fmt::format(
        "{}expert-parallel rank {} of {} {}; this server cannot generate until it is restarted",
        kServiceUnavailable, rank, group_.size(), why);
    end_all(failure_, StatusCode::kResourceExhausted);
  }
  cv_.notify_all();
}

void EpBackend::forget(int rank) {
  queued_ -= 1;
  in_flight_[size_t(rank)] -= 1;
}

// Refuses what was not accepted yet, ends what runs. mu_ held.
void EpBackend::end_all(const std::string& reason, StatusCode code) {
  for (auto& [id, w] : waiting_) w.accepted->set_value(Status(code, reason));
  for (auto& [id, live] : live_) {
    metrics_.count_abort();
    engine::RequestOutput out;
    out.request_id = id;
    out.finished = true;
    out.finish_reason = engine::FinishReason::kAbort;
    out.error = reason;
    live.stream->push(std::move(out));
  }
  waiting_.clear();
  live_.clear();
  pending_.clear();
  queued_ = 0;
  std::fill(in_flight_.begin(), in_flight_.end(), 0);
}

// Waits for work when no rank has any, then takes it. False once a rank was lost.
bool EpBackend::take_control(ep::Control& c) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!rank_.any_work())
    cv_.wait(lock, [&] { return stopping_ || !failure_.empty() || !pending_.empty() || !aborts_.empty(); });
  if (!failure_.empty()) return false;
  c.stop = stopping_;
  if (!c.stop) c.add.swap(pending_);
  for (int64_t id : aborts_) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;  // finished meanwhile
    metrics_.count_abort();
    engine::RequestOutput out;
    out.request_id = id;
    out.finished = true;
    out.finish_reason = engine::FinishReason::kAbort;
    out.error = "cancelled";
    forget(it->second.rank);
    it->second.stream->push(std::move(out));
    live_.erase(it);
    c.abort.push_back(id);
  }
  aborts_.clear();
  return true;
}

void EpBackend::run() {
  for (;;) {
    ep::Control c;
    if (!take_control(c)) {  // a rank was lost: no collective can complete
      loop_done_ = true;
      return;
    }
    if (c.stop && liveness_) liveness_->set_stopping();
    if (!c.stop) c.rebalance = rebalancer_.next();
    std::optional<std::vector<ep::RankReport>> reports = rank_.iterate(c);
    if (!reports) break;
    handle(*reports);
  }
  std::lock_guard<std::mutex> lock(mu_);
  end_all(kShuttingDown, StatusCode::kResourceExhausted);
  loop_done_ = true;
}

void EpBackend::observe_rebalance(const std::vector<ep::RankReport>& reports) {
  std::vector<parallel::RankRebalanceReport> r;
  for (const ep::RankReport& x : reports) r.push_back(x.rebalance);
  rebalancer_.observe(r);
  const parallel::RebalanceStats st = rebalancer_.stats();
  if (st.rebalances != logged_rebalances_)
    log::info("expert parallel: switched to placement {} ({} expert weights read by rebalances so far; window imbalance {:.3f}, EPLB plans {:.3f})",
              st.epoch, st.experts_loaded, st.imbalance_before, st.imbalance_planned);
  if (st.failed != logged_failures_) log::warn("expert parallel: rebalance dropped: {}", st.last_error);
  logged_rebalances_ = st.rebalances;
  logged_failures_ = st.failed;
}

std::string EpBackend::extra_metrics() const {
  return load_.render() + ep::render_rebalance_metrics(rebalancer_.stats(), rebalancer_.window_imbalance(),
                                                       rebalancer_.window_steps());
}

void EpBackend::handle(const std::vector<ep::RankReport>& reports) {
  load_.update(reports);
  observe_rebalance(reports);
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) return;
  EngineGauges g;
  for (const ep::RankReport& r : reports) {
    for (const auto& [id, status] : r.accepted) {
      auto it = waiting_.find(id);
      if (it == waiting_.end()) continue;
      Waiter w = std::move(it->second);
      waiting_.erase(it);
      if (status.is_ok()) {
        Live live;
        live.stream = w.stream;
        live.rank = w.rank;
        live.submitted = live.last_token = Clock::now();
        live_.emplace(id, std::move(live));
      } else {
        forget(w.rank);
      }
      w.accepted->set_value(status);
    }
    g.waiting += r.waiting;
    g.running += r.running;
    g.kv_blocks += r.kv_blocks;
    g.kv_blocks_in_use += r.kv_blocks_in_use;
    g.prefix_lookup_tokens += r.prefix_lookup_tokens;
    g.prefix_hit_tokens += r.prefix_hit_tokens;
    g.steps = std::max(g.steps, r.steps);
  }
  for (const ep::RankReport& r : reports)
    for (engine::RequestOutput out : r.outputs) deliver(out);
  gauges_ = g;
}

void EpBackend::deliver(engine::RequestOutput& out) {
  auto it = live_.find(out.request_id);
  if (it == live_.end()) return;  // cancelled meanwhile
  Live& live = it->second;
  const auto now = Clock::now();
  const size_t n = out.new_token_ids.size();
  if (n > 0) {
    if (!live.got_first_token) {
      metrics_.ttft().observe(std::chrono::duration<double>(now - live.submitted).count());
      live.got_first_token = true;
      for (size_t i = 1; i < n; ++i) metrics_.inter_token().observe(0);
    } else {
      const double since = std::chrono::duration<double>(now - live.last_token).count();
      for (size_t i = 0; i < n; ++i) metrics_.inter_token().observe(since / double(n));
    }
    live.last_token = now;
    metrics_.add_generation_tokens(int64_t(n));
  }
  const bool done = out.finished;
  if (done) {
    metrics_.add_prompt_tokens(out.prompt_tokens);
    metrics_.e2e().observe(std::chrono::duration<double>(now - live.submitted).count());
    forget(live.rank);  // before the push: a client with its answer must not see it in flight
  }
  live.stream->push(std::move(out));
  if (done) live_.erase(it);
}

}  // namespace deepinfer::serve
