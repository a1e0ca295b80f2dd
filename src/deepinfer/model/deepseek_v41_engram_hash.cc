// Engram hash layout (primes, offsets, sidecar) and the per-position row lookup.
#include "deepinfer/model/deepseek_v41_engram_hash.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "deepinfer/base/check.h"

namespace deepinfer::model {
namespace {

using nlohmann::json;

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// DeepSeek's Engram demo: the next prime strictly above `n` not used yet.
int64_t next_unused_prime(int64_t n, const std::set<int64_t>& used) {
  int64_t c = n + 1;
  while (!is_prime(c) || used.count(c)) ++c;
  return c;
}

// A multiplier from the sidecar: a decimal string (JSON numbers lose bits above 2^53) or an
// integer.
Result<uint64_t> parse_multiplier(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() <= 20 &&
        std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      try {
        return static_cast<uint64_t>(std::stoull(s));
      } catch (const std::exception&) {
      }
    }
  }
  return corrupt("{}: multiplier {} is not a non-negative integer", path, v.dump());
}

Status read_sidecar(const std::string& path, int64_t vocab, EngramHashLayout& out,
                    json& multipliers) {
  std::ifstream in(path);
  if (!in)
    return not_found(
        "{}: cannot open (DeepSeek-V4.1 Engram needs its hash layout: token_map, pad_id, "
        "multipliers; make it from the checkpoint's tokenizer.json with "
        "`python3 scripts/make_engram_hash.py MODEL_DIR`)",
        path);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    return corrupt("{}: invalid JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("token_map") || !j["token_map"].is_array() ||
      !j.contains("pad_id") || !j["pad_id"].is_number_integer() || !j.contains("multipliers") ||
      !j["multipliers"].is_object())
    return corrupt("{}: expected {{\"token_map\": [...], \"pad_id\": n, \"multipliers\": {{...}}}}",
                   path);
  const json& map = j["token_map"];
  if (static_cast<int64_t>(map.size()) != vocab)
    return corrupt("{}: token_map has {} entries for a vocabulary of {}", path, map.size(), vocab);
  out.token_map.reserve(map.size());
  for (const json& v : map) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      return corrupt("{}: token_map holds {} (normalized ids are 0..{})", path, v.dump(),
                     vocab - 1);
    out.token_map.push_back(v.get<int32_t>());
  }
  out.pad_id = j["pad_id"].get<int64_t>();
  multipliers = j["multipliers"];
  return Status::ok();
}

}  // namespace

Result<EngramHashLayout> engram_hash_layout(const DeepseekV41Config& cfg,
                                            const std::string& sidecar_path) {
  const V41EngramConfig& e = cfg.engram;
  EngramHashLayout out;
  out.max_ngram = e.max_ngram;
  out.n_heads = e.n_heads;
  out.n_cols = (e.max_ngram - 1) * e.n_heads;
  json multipliers;
  DI_RETURN_IF_ERROR(read_sidecar(sidecar_path, cfg.vocab_size, out, multipliers));
  if (out.pad_id != out.token_map[e.pad_token_id])
    return corrupt("{}: pad_id {} is not token_map[engram_pad_token_id {}] = {}", sidecar_path,
                   out.pad_id, e.pad_token_id, out.token_map[e.pad_token_id]);
  const int64_t normalized_vocab =
      *std::max_element(out.token_map.begin(), out.token_map.end()) + 1;
  // x * m must not overflow int64 for any normalized id x (DeepSeek bounds m the same way).
  const uint64_t max_multiplier =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / normalized_vocab);
  std::set<int64_t> used;
  for (int layer : e.layers) {
    EngramLayerHash h;
    h.layer = layer;
    const auto it = multipliers.find(std::to_string(layer));
    if (it == multipliers.end() || !it->is_array() || static_cast<int>(it->size()) != e.max_ngram)
      return corrupt("{}: multipliers[\"{}\"] must list {} multipliers", sidecar_path, layer,
                     e.max_ngram);
    for (const json& v : *it) {
      DI_ASSIGN_OR_RETURN(const uint64_t m, parse_multiplier(v, sidecar_path));
      if (m % 2 == 0 || m > max_multiplier)
        return corrupt("{}: multiplier {} of layer {} must be odd and at most {}", sidecar_path, m,
                       layer, max_multiplier);
      h.multipliers.push_back(m);
    }
    for (int n = 2; n <= e.max_ngram; ++n) {
      int64_t last = e.vocab_size[n - 2] - 1;
      for (int head = 0; head < e.n_heads; ++head) {
        last = next_unused_prime(last, used);
        used.insert(last);
        h.offsets.push_back(h.table_rows);
        h.primes.push_back(last);
        h.table_rows += last;
      }
    }
    out.layers.push_back(std::move(h));
  }
  return out;
}

void engram_rows_at(const EngramHashLayout& layout, const EngramLayerHash& layer,
                    std::span<const int32_t> recent, std::span<int64_t> out) {
  DI_CHECK(!recent.empty() && out.size() == static_cast<size_t>(layout.n_cols),
           "engram_rows_at: bad sizes");
  // back(k): the normalized id k positions before the current one (pad before position 0).
  auto back = [&](int k) -> uint64_t {
    if (k >= static_cast<int>(recent.size())) return static_cast<uint64_t>(layout.pad_id);
    return static_cast<uint64_t>(layout.token_map[recent[recent.size() - 1 - k]]);
  };
  uint64_t mix = back(0) * layer.multipliers[0];
  int col = 0;
  for (int n = 2; n <= layout.max_ngram; ++n) {
    mix ^= back(n - 1) * layer.multipliers[n - 1];
    for (int head = 0; head < layout.n_heads; ++head, ++col)
      out[col] =
          static_cast<int64_t>(mix % static_cast<uint64_t>(layer.primes[col])) + layer.offsets[col];
  }
}

void engram_rows_for_sequence(const EngramHashLayout& layout, const EngramLayerHash& layer,
                              std::span<const int32_t> ids, std::span<int64_t> out) {
  DI_CHECK(out.size() == ids.size() * layout.n_cols, "engram_rows_for_sequence: bad output size");
  for (size_t t = 0; t < ids.size(); ++t) {
    const size_t first =
        t + 1 >= static_cast<size_t>(layout.max_ngram) ? t + 1 - layout.max_ngram : 0;
    engram_rows_at(layout, layer, ids.subspan(first, t + 1 - first),
                   out.subspan(t * layout.n_cols, layout.n_cols));
  }
}

}  // namespace deepinfer::model
