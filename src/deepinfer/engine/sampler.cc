// The sampling pipeline: processed logits -> logprobs -> temperature, top-k, top-p, min-p ->
// one Philox draw. Candidates are ordered by (logit desc, id asc) so ties never depend on the
// standard library's sort.
#include "deepinfer/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "deepinfer/base/philox.h"

namespace deepinfer::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kGreedyEps = 1e-5f;  // temperatures below this are greedy (as vLLM)

struct Cand {
  float logit;
  int32_t id;
};
inline bool better(const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

// Keeps the smallest best-first set whose probability mass reaches top_p (the token that
// crosses the threshold is kept). A sorted list is walked directly; an unsorted one (a whole
// 49k vocabulary) is bucketed by logit so only the bucket holding the threshold gets sorted.
// The kept tokens stay in a deterministic order: kept buckets in input order, then the sorted
// part of the boundary bucket.
void apply_top_p(std::vector<Cand>& c, float top_p, bool sorted) {
  const float mx = sorted ? c[0].logit : std::min_element(c.begin(), c.end(), better)->logit;  // best first
  double total = 0;
  for (const Cand& x : c) total += std::exp(static_cast<double>(x.logit - mx));
  const double target = static_cast<double>(top_p) * total;
  double cum = 0;
  if (sorted) {
    for (size_t i = 0; i < c.size(); ++i) {
      cum += std::exp(static_cast<double>(c[i].logit - mx));
      if (cum >= target) {
        c.resize(i + 1);
        return;
      }
    }
    return;
  }
  constexpr int kBuckets = 2048;
  constexpr float kRange = 40.0f;  // logits further below the max share the last bucket
  thread_local std::vector<double> mass;
  thread_local std::vector<uint16_t> bucket_of;
  mass.assign(kBuckets, 0.0);
  bucket_of.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const float d = (mx - c[i].logit) * (kBuckets / kRange);
    const int b = d >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(d);
    bucket_of[i] = static_cast<uint16_t>(b);
    mass[b] += std::exp(static_cast<double>(c[i].logit - mx));
  }
  int edge = kBuckets - 1;
  for (int b = 0; b < kBuckets; ++b) {
    if (cum + mass[b] >= target) {
      edge = b;
      break;
    }
    cum += mass[b];
  }
  thread_local std::vector<Cand> boundary;
  boundary.clear();
  size_t kept = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (bucket_of[i] < edge) c[kept++] = c[i];
    else if (bucket_of[i] == edge) boundary.push_back(c[i]);
  }
  std::sort(boundary.begin(), boundary.end(), better);
  c.resize(kept);
  for (const Cand& x : boundary) {
    c.push_back(x);
    cum += std::exp(static_cast<double>(x.logit - mx));
    if (cum >= target) break;
  }
}

}  // namespace

SampleResult sample(const float* logits, int32_t vocab, const SamplingParams& params, const SamplerState& history,
                    uint64_t request_key, uint64_t step, const uint32_t* allowed_mask) {
  SampleResult res;
  thread_local std::vector<float> work;
  work.assign(logits, logits + vocab);
  detail::apply_bias_and_penalties(work.data(), vocab, params, history);
  if (allowed_mask) {
    for (int32_t i = 0; i < vocab; ++i)
      if (!((allowed_mask[i >> 5] >> (i & 31)) & 1u)) work[i] = kNegInf;
  }
  // NaN logits (a broken model) are treated as disallowed rather than poisoning the softmax.
  float mx = kNegInf;
  int32_t argmax = -1;
  for (int32_t i = 0; i < vocab; ++i) {
    if (std::isnan(work[i])) work[i] = kNegInf;
    if (work[i] > mx) {
      mx = work[i];
      argmax = i;
    }
  }
  if (argmax < 0 || mx == std::numeric_limits<float>::infinity()) {
    if (argmax >= 0) res.token = argmax;  // +inf bias: that token is forced
    return res;
  }
  const bool greedy = params.temperature < kGreedyEps || params.top_k == 1;
  if (greedy && params.logprobs < 0) {
    // Nobody asked for a logprob: skip the vocabulary-wide exp (about 1 ms at 49k tokens).
    res.token = argmax;
    return res;
  }
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(work[i] - mx));
  const double lse = mx + std::log(sum);
  auto logprob_of = [&](int32_t id) { return static_cast<float>(work[id] - lse); };

  if (params.logprobs > 0) {
    thread_local std::vector<Cand> all;
    all.clear();
    for (int32_t i = 0; i < vocab; ++i)
      if (work[i] != kNegInf) all.push_back({work[i], i});
    const size_t n = std::min(all.size(), static_cast<size_t>(params.logprobs));
    std::partial_sort(all.begin(), all.begin() + n, all.end(), better);
    for (size_t i = 0; i < n; ++i) res.top_logprobs.push_back({all[i].id, logprob_of(all[i].id)});
  }

  if (greedy) {
    res.token = argmax;  // strict '>' above keeps the lowest id among ties
    res.logprob = logprob_of(argmax);
    return res;
  }

  thread_local std::vector<Cand> cand;
  cand.clear();
  const float inv_t = 1.0f / params.temperature;
  for (int32_t i = 0; i < vocab; ++i)
    if (work[i] != kNegInf) cand.push_back({work[i] * inv_t, i});
  bool sorted = false;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < cand.size()) {
    std::nth_element(cand.begin(), cand.begin() + params.top_k, cand.end(), better);
    cand.resize(params.top_k);
    std::sort(cand.begin(), cand.end(), better);
    sorted = true;
  }
  if (params.top_p < 1.0f) {
    apply_top_p(cand, params.top_p, sorted);
  }
  // The best candidate always survives top-k/top-p, so the max is unchanged.
  const float top = sorted ? cand[0].logit : mx * inv_t;
  if (params.min_p > 0.0f) {
    // p / p_max >= min_p  <=>  logit >= top + log(min_p); truncation does not change the ratio.
    const float cut = top + std::log(params.min_p);
    std::erase_if(cand, [cut](const Cand& c) { return c.logit < cut; });
  }

  const uint64_t stream = params.has_seed ? 0 : request_key;
  const double u = philox_uniform_double(params.seed, stream, step);
  double total = 0;
  for (const Cand& c : cand) total += std::exp(static_cast<double>(c.logit - top));
  const double target = u * total;
  double cum = 0;
  res.token = cand.back().id;  // if rounding leaves target unreached
  for (const Cand& c : cand) {
    cum += std::exp(static_cast<double>(c.logit - top));
    if (cum > target) {
      res.token = c.id;
      break;
    }
  }
  res.logprob = logprob_of(res.token);
  return res;
}

}  // namespace deepinfer::engine
