#include "deepinfer/serve/ep_protocol.h"

#include <nlohmann/json.hpp>

#include "deepinfer/serve/pd_protocol.h"

namespace deepinfer::serve::ep {

using nlohmann::json;

namespace {
// CBOR, not JSON text: a chunk of output text may end inside a UTF-8 sequence, and CBOR keeps
// string bytes as they are (JSON text would have to replace them).
std::string to_bytes(const json& j) {
  const std::vector<uint8_t> b = json::to_cbor(j);
  return std::string(b.begin(), b.end());
}
}  // namespace

std::string encode_control(const Control& c) {
  json add = json::array();
  for (const Assignment& a : c.add)
    add.push_back({{"id", a.id}, {"rank", a.rank}, {"request", pd::request_to_json(a.request)}});
  json j{{"stop", c.stop}, {"add", std::move(add)}, {"abort", c.abort}};
  if (c.rebalance.prepare_epoch > 0)
    j["prepare"] = {{"epoch", c.rebalance.prepare_epoch}, {"phy2log", c.rebalance.phy2log}};
  if (c.rebalance.switch_epoch > 0) j["switch"] = c.rebalance.switch_epoch;
  return to_bytes(j);
}

Result<Control> decode_control(const std::string& text) {
  Control c;
  try {
    const json j = json::from_cbor(text);
    c.stop = j.at("stop").get<bool>();
    c.abort = j.at("abort").get<std::vector<int64_t>>();
    for (const json& a : j.at("add")) {
      DI_ASSIGN_OR_RETURN(engine::GenerationRequest r, pd::request_from_json(a.at("request")));
      c.add.push_back(Assignment{a.at("id").get<int64_t>(), a.at("rank").get<int>(), std::move(r)});
    }
    if (j.contains("prepare")) {
      c.rebalance.prepare_epoch = j["prepare"].at("epoch").get<int64_t>();
      c.rebalance.phy2log = j["prepare"].at("phy2log").get<std::vector<int32_t>>();
    }
    if (j.contains("switch")) c.rebalance.switch_epoch = j["switch"].get<int64_t>();
  } catch (const json::exception& e) {
    return invalid_argument("expert parallel: a malformed control message: {}", e.what());
  }
  return c;
}

std::string encode_report(const RankReport& r) {
  json accepted = json::array(), outputs = json::array();
  for (const auto& [id, st] : r.accepted) accepted.push_back({id, int(st.code()), st.message()});
  for (const engine::RequestOutput& o : r.outputs) outputs.push_back({o.request_id, pd::output_to_json(o)});
  json j = {{"accepted", std::move(accepted)}, {"outputs", std::move(outputs)},
                  {"running", r.running}, {"waiting", r.waiting}, {"kv_blocks", r.kv_blocks},
                  {"kv_blocks_in_use", r.kv_blocks_in_use}, {"prefix_lookup", r.prefix_lookup_tokens},
                  {"prefix_hit", r.prefix_hit_tokens}, {"steps", r.steps}, {"moe_rows", r.moe_rows}};
  json rows = json::array();  // flat [index, rows, index, rows, ...]
  for (const auto& [i, n] : r.rebalance.rows) rows.push_back(i), rows.push_back(n);
  j["expert_rows"] = std::move(rows);
  j["staged_epoch"] = r.rebalance.staged_epoch;
  j["experts_loaded"] = r.rebalance.experts_loaded;
  if (!r.rebalance.stage_error.empty()) j["stage_error"] = r.rebalance.stage_error;
  return to_bytes(j);
}

Result<RankReport> decode_report(const std::string& text) {
  RankReport r;
  try {
    const json j = json::from_cbor(text);
    for (const json& a : j.at("accepted"))
      r.accepted.emplace_back(a.at(0).get<int64_t>(),
                              Status(static_cast<StatusCode>(a.at(1).get<int>()), a.at(2).get<std::string>()));
    for (const json& o : j.at("outputs")) {
      DI_ASSIGN_OR_RETURN(engine::RequestOutput out, pd::output_from_json(o.at(1)));
      out.request_id = o.at(0).get<int64_t>();
      r.outputs.push_back(std::move(out));
    }
    r.running = j.at("running").get<int>();
    r.waiting = j.at("waiting").get<int>();
    r.kv_blocks = j.at("kv_blocks").get<int>();
    r.kv_blocks_in_use = j.at("kv_blocks_in_use").get<int>();
    r.prefix_lookup_tokens = j.at("prefix_lookup").get<int64_t>();
    r.prefix_hit_tokens = j.at("prefix_hit").get<int64_t>();
    r.steps = j.at("steps").get<int64_t>();
    r.moe_rows = j.at("moe_rows").get<uint64_t>();
    const auto rows = j.at("expert_rows").get<std::vector<uint32_t>>();
    if (rows.size() % 2 != 0) return invalid_argument("expert parallel: a rank report's expert_rows is odd");
    for (size_t i = 0; i + 1 < rows.size(); i += 2) r.rebalance.rows.emplace_back(rows[i], rows[i + 1]);
    r.rebalance.staged_epoch = j.at("staged_epoch").get<int64_t>();
    r.rebalance.experts_loaded = j.at("experts_loaded").get<int>();
    if (j.contains("stage_error")) r.rebalance.stage_error = j["stage_error"].get<std::string>();
  } catch (const json::exception& e) {
    return invalid_argument("expert parallel: a malformed rank report: {}", e.what());
  }
  return r;
}

}  // namespace deepinfer::serve::ep
