// The per-transfer bookkeeping behind KvSender::flush, without UCX.
#include "deepinfer/transfer/transfer_ledger.h"

#include <gtest/gtest.h>

#include <thread>

namespace deepinfer::transfer {
namespace {

using namespace std::chrono_literals;

TEST(TransferLedger, UnknownTransferIsDone) {
  TransferLedger l;
  EXPECT_TRUE(l.wait(7, 0ms).is_ok());
}

TEST(TransferLedger, WaitReturnsWhenTheLastMessageFinishesOnAnotherThread) {
  TransferLedger l;
  l.add(1, "peer a");
  l.add(1, "peer a");
  l.add(2, "peer a");
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    l.finish(1, Status::ok());
    l.finish(1, Status::ok());
  });
  EXPECT_TRUE(l.wait(1, 10s).is_ok());
  t.join();
  EXPECT_EQ(l.transfers_tracked(), 1u);  // transfer 2 is still in flight
  l.finish(2, Status::ok());
  EXPECT_TRUE(l.wait(2, 0ms).is_ok());
  EXPECT_EQ(l.transfers_tracked(), 0u);
}

TEST(TransferLedger, TimeoutNamesTransferPeerAndCount) {
  TransferLedger l;
  l.add(42, "peer 0badf00d");
  l.add(42, "peer 0badf00d");
  l.finish(42, Status::ok());
  Status s = l.wait(42, 30ms);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "kv transfer 42: 1 of 2 messages to peer 0badf00d not delivered after 30 ms");
  // The abandoned message finishing later drops the record; nothing leaks.
  l.finish(42, Status::ok());
  EXPECT_EQ(l.transfers_tracked(), 0u);
}

TEST(TransferLedger, FirstFailureIsReportedOnceEverythingEnded) {
  TransferLedger l;
  for (int i = 0; i < 3; ++i) l.add(5, "peer x");
  l.finish(5, io_error("peer x: connection failed: boom"));
  l.finish(5, Status::ok());
  l.finish(5, io_error("peer x: second"));
  Status s = l.wait(5, 1s);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(),
            "kv transfer 5: 2 of 3 messages failed; first error: peer x: connection failed: boom");
  EXPECT_EQ(l.transfers_tracked(), 0u);
  EXPECT_TRUE(l.wait(5, 0ms).is_ok());  // reported once
}

TEST(TransferLedger, IdReusedAfterAnAbandonedWaitStartsAFreshRecord) {
  TransferLedger l;
  l.add(9, "peer old");
  l.finish(9, io_error("old failure"));
  l.add(9, "peer old");
  EXPECT_FALSE(l.wait(9, 1ms).is_ok());  // failure + one still in flight
  l.add(9, "peer new");
  l.finish(9, Status::ok());  // the old one
  l.finish(9, Status::ok());  // the new one
  EXPECT_TRUE(l.wait(9, 1s).is_ok());
}

}  // namespace
}  // namespace deepinfer::transfer
