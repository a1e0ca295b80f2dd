// The per-step messages of `serve --ep` (ep_protocol.h) and the load window of its /metrics
// (ep_load.h), with no MPI.
#include <gtest/gtest.h>

#include "deepinfer/serve/ep_load.h"
#include "deepinfer/serve/ep_protocol.h"

namespace deepinfer::serve::ep {
namespace {

TEST(EpProtocol, ControlRoundTripsEveryRequestField) {
  Control c;
  c.abort = {7, 9};
  engine::GenerationRequest r;
  r.prompt_ids = {1, 2, 3};
  r.max_tokens = 17;
  r.sampling.temperature = 0.5f;
  r.sampling.seed = 42;
  r.sampling.has_seed = true;
  r.sampling.logprobs = 2;
  r.stop = {"\n\n"};
  r.grammar = structured::GrammarSpec{};
  r.grammar->kind = structured::GrammarSpec::kJsonSchema;
  r.grammar->source = R"({"type":"object"})";
  c.add.push_back(Assignment{5, 1, r});
  Result<Control> back = decode_control(encode_control(c));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_FALSE(back->stop);
  EXPECT_EQ(back->abort, c.abort);
  ASSERT_EQ(back->add.size(), 1u);
  const Assignment& a = back->add[0];
  EXPECT_EQ(a.id, 5);
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.request.prompt_ids, r.prompt_ids);
  EXPECT_EQ(a.request.max_tokens, 17);
  EXPECT_EQ(a.request.sampling.seed, 42u);
  EXPECT_TRUE(a.request.sampling.has_seed);
  EXPECT_EQ(a.request.sampling.logprobs, 2);
  EXPECT_EQ(a.request.stop, r.stop);
  ASSERT_TRUE(a.request.grammar.has_value());
  EXPECT_EQ(a.request.grammar->source, r.grammar->source);
}

TEST(EpProtocol, ReportKeepsIdsBytesAndLogprobBits) {
  RankReport r;
  r.accepted = {{3, Status()}, {4, invalid_argument("prompt too long")}};
  engine::RequestOutput o;
  o.request_id = 3;
  o.new_token_ids = {65, 0xC3};
  o.new_text = std::string("A\xC3", 2);  // ends inside a UTF-8 sequence: kept as bytes
  o.new_logprobs.push_back(engine::LogprobEntry{65, -0.1234567f, {{65, -0.1234567f}, {66, -3.0000002f}}});
  r.outputs.push_back(o);
  r.running = 2;
  r.moe_rows = 123456789012ull;
  Result<RankReport> back = decode_report(encode_report(r));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->accepted.size(), 2u);
  EXPECT_TRUE(back->accepted[0].second.is_ok());
  EXPECT_EQ(back->accepted[1].second.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(back->accepted[1].second.message(), "prompt too long");
  ASSERT_EQ(back->outputs.size(), 1u);
  EXPECT_EQ(back->outputs[0].request_id, 3);
  EXPECT_EQ(back->outputs[0].new_text, o.new_text);
  EXPECT_EQ(back->outputs[0].new_logprobs[0].logprob, -0.1234567f);
  EXPECT_EQ(back->outputs[0].new_logprobs[0].top[1].second, -3.0000002f);
  EXPECT_EQ(back->running, 2);
  EXPECT_EQ(back->moe_rows, 123456789012ull);
}

TEST(EpProtocol, RebalanceFieldsRoundTrip) {
  Control c;
  c.rebalance.prepare_epoch = 3;
  c.rebalance.phy2log = {4, 5, 6, 7, 0, 1, 2, 3};
  Result<Control> back = decode_control(encode_control(c));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->rebalance.prepare_epoch, 3);
  EXPECT_EQ(back->rebalance.phy2log, c.rebalance.phy2log);
  EXPECT_EQ(back->rebalance.switch_epoch, 0);
  Control sw;
  sw.rebalance.switch_epoch = 3;
  back = decode_control(encode_control(sw));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->rebalance.switch_epoch, 3);
  EXPECT_EQ(back->rebalance.prepare_epoch, 0);
  EXPECT_TRUE(back->rebalance.phy2log.empty());

  RankReport r;
  r.rebalance.rows = {{0, 7}, {4000000000u, 1}};
  r.rebalance.staged_epoch = 3;
  r.rebalance.experts_loaded = 12;
  r.rebalance.stage_error = "model.safetensors: truncated";
  Result<RankReport> rb = decode_report(encode_report(r));
  ASSERT_TRUE(rb.is_ok()) << rb.status().message();
  EXPECT_EQ(rb->rebalance.rows, r.rebalance.rows);
  EXPECT_EQ(rb->rebalance.staged_epoch, 3);
  EXPECT_EQ(rb->rebalance.experts_loaded, 12);
  EXPECT_EQ(rb->rebalance.stage_error, r.rebalance.stage_error);
}

TEST(EpProtocol, MalformedMessagesAreErrors) {
  EXPECT_FALSE(decode_control("not cbor").is_ok());
  EXPECT_FALSE(decode_report("").is_ok());
}

TEST(EpLoad, ImbalanceIsBusiestOverMeanOfTheWindow) {
  EpLoad load(2);
  EXPECT_EQ(load.imbalance(), 0.0);
  std::vector<RankReport> step(2);
  step[0].moe_rows = 30;
  step[1].moe_rows = 10;
  load.update(step);
  EXPECT_DOUBLE_EQ(load.imbalance(), 1.5);  // 30 / mean 20
  load.update(step);                       // no new rows: an idle step leaves the window alone
  EXPECT_DOUBLE_EQ(load.imbalance(), 1.5);
  // Rank 1 catches up over many steps; the first step leaves the window.
  for (int i = 1; i <= EpLoad::kWindowSteps; ++i) {
    step[0].moe_rows += 10;
    step[1].moe_rows += 10;
    load.update(step);
  }
  EXPECT_DOUBLE_EQ(load.imbalance(), 1.0);
  load.set_lost(1);
  EXPECT_NE(load.render().find("deepinfer_ep_rank_up{rank=\"1\"} 0"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::serve::ep
