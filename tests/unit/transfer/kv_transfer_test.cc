// KvSender and KvReceiver in one process: sizes from 16 KiB to 64 MiB, order, interleaved
// transfers from several threads, stats, bad addresses, and a receiver that goes away.
#include "deepinfer/transfer/kv_transfer.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "deepinfer/transfer/address.h"
#include "test_messages.h"

namespace deepinfer::transfer {
namespace {

using namespace std::chrono_literals;
using testing::check_message;
using testing::make_message;

// Collects what a receiver hands over.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> got;

  MessageHandler handler() {
    return [this](uint64_t id, std::vector<uint8_t> m) {
      std::lock_guard lock(mu);
      got.emplace_back(id, std::move(m));
      cv.notify_all();
    };
  }
  bool wait_for(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return got.size() >= n; });
  }
};

std::unique_ptr<KvReceiver> make_receiver(Inbox& inbox) {
  auto r = KvReceiver::create(inbox.handler());
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

std::unique_ptr<KvSender> make_sender() {
  auto s = KvSender::create();
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

TEST(KvTransfer, AddressIsHexOfARealWorkerAddress) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  ASSERT_TRUE(receiver);
  const std::string& a = receiver->address();
  EXPECT_GT(a.size(), 16u);
  EXPECT_TRUE(hex_decode(a).is_ok());
  Inbox other_inbox;
  auto other = make_receiver(other_inbox);
  ASSERT_TRUE(other);
  EXPECT_NE(other->address(), a);
}

TEST(KvTransfer, SizesFrom16KiBTo64MiBArriveIntactAndInOrder) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  auto sender = make_sender();
  ASSERT_TRUE(receiver && sender);
  // Eager and rendezvous sizes mixed, a big one followed by a small one (which must not
  // overtake it), odd sizes.
  const std::vector<size_t> sizes = {16 << 10,      (16 << 10) + 1, 256 << 10, 1 << 20,
                                     (8 << 20) + 7, 64 << 20,       16 << 10,  3 << 20};
  for (size_t i = 0; i < sizes.size(); ++i)
    sender->send(receiver->address(), 1, make_message(1, i, sizes[i]));
  Status st = sender->flush(1, 60s);
  ASSERT_TRUE(st.is_ok()) << st.message();
  // Delivered means matched: the handler may still be copying the last one in.
  ASSERT_TRUE(inbox.wait_for(sizes.size(), 30s));
  std::lock_guard lock(inbox.mu);
  ASSERT_EQ(inbox.got.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(inbox.got[i].first, 1u);
    EXPECT_EQ(check_message(1, i, sizes[i], inbox.got[i].second), "");
  }
}

TEST(KvTransfer, ManyTransfersInterleavedFromSeveralThreads) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  auto sender = make_sender();
  ASSERT_TRUE(receiver && sender);
  constexpr int kThreads = 4, kTransfersPerThread = 3, kMessages = 10;
  auto size_of = [](uint64_t id, int i) {
    return size_t{16 << 10} + (id * 7919 + i * 104729) % (300 << 10);
  };
  std::vector<std::thread> threads;
  std::vector<Status> results(kThreads * kTransfersPerThread);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread interleaves its own transfers message by message.
      for (int i = 0; i < kMessages; ++i)
        for (int k = 0; k < kTransfersPerThread; ++k) {
          const uint64_t id = 100 + t * kTransfersPerThread + k;
          sender->send(receiver->address(), id, make_message(id, i, size_of(id, i)));
        }
      for (int k = 0; k < kTransfersPerThread; ++k)
        results[t * kTransfersPerThread + k] =
            sender->flush(100 + t * kTransfersPerThread + k, 60s);
    });
  }
  for (auto& th : threads) th.join();
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.message();
  const size_t total = kThreads * kTransfersPerThread * kMessages;
  ASSERT_TRUE(inbox.wait_for(total, 30s));
  std::lock_guard lock(inbox.mu);
  ASSERT_EQ(inbox.got.size(), total);
  std::map<uint64_t, int> next;  // each transfer's messages arrive in the order it sent them
  for (auto& [id, m] : inbox.got) {
    const int i = next[id]++;
    EXPECT_EQ(check_message(id, i, size_of(id, i), m), "");
  }
  EXPECT_EQ(next.size(), size_t{kThreads * kTransfersPerThread});
  for (auto& [id, n] : next) EXPECT_EQ(n, kMessages) << "transfer " << id;
}

// One sender, several decode peers: each gets its own messages in order, and a peer that goes
// away does not hold up the others.
TEST(KvTransfer, OneSenderManyPeersAndOneGoesAway) {
  constexpr int kPeers = 3, kMessages = 10;
  std::vector<Inbox> inboxes(kPeers);
  std::vector<std::unique_ptr<KvReceiver>> receivers;
  std::vector<std::string> addresses;
  for (auto& inbox : inboxes) {
    receivers.push_back(make_receiver(inbox));
    ASSERT_TRUE(receivers.back());
    addresses.push_back(receivers.back()->address());
  }
  auto sender = make_sender();
  ASSERT_TRUE(sender);
  for (int i = 0; i < kMessages; ++i)
    for (int p = 0; p < kPeers; ++p)
      sender->send(addresses[p], 10 + p, make_message(10 + p, i, 40000 + p));
  for (int p = 0; p < kPeers; ++p) {
    Status st = sender->flush(10 + p, 30s);
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  for (int p = 0; p < kPeers; ++p) {
    ASSERT_TRUE(inboxes[p].wait_for(kMessages, 30s)) << "peer " << p;
    std::lock_guard lock(inboxes[p].mu);
    ASSERT_EQ(inboxes[p].got.size(), size_t{kMessages});
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_EQ(inboxes[p].got[i].first, uint64_t(10 + p));
      EXPECT_EQ(check_message(10 + p, i, 40000 + p, inboxes[p].got[i].second), "");
    }
  }
  receivers[1].reset();
  sender->send(addresses[1], 21, make_message(21, 0, 1 << 20));
  for (int p : {0, 2}) sender->send(addresses[p], 20 + p, make_message(20 + p, 0, 1 << 20));
  for (int p : {0, 2}) {
    Status st = sender->flush(20 + p, 30s);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(inboxes[p].wait_for(kMessages + 1, 30s));
  }
  EXPECT_FALSE(sender->flush(21, 1s).is_ok());
}

TEST(KvTransfer, StatsCountMessagesBytesAndFailures) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  auto sender = make_sender();
  ASSERT_TRUE(receiver && sender);
  EXPECT_EQ(sender->stats().messages, 0u);
  const std::vector<size_t> sizes = {16 << 10, 100000, 1 << 20};
  for (size_t i = 0; i < sizes.size(); ++i)
    sender->send(receiver->address(), 7, make_message(7, i, sizes[i]));
  sender->send("not hex", 8, make_message(8, 0, 4096));
  ASSERT_TRUE(sender->flush(7, 30s).is_ok());
  EXPECT_FALSE(sender->flush(8, 30s).is_ok());
  ASSERT_TRUE(inbox.wait_for(sizes.size(), 30s));
  const size_t bytes = sizes[0] + sizes[1] + sizes[2];
  const KvSenderStats s = sender->stats();
  EXPECT_EQ(s.messages, 3u);
  EXPECT_EQ(s.bytes, bytes);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_GT(s.seconds_sending, 0.0);
  const KvReceiverStats r = receiver->stats();
  EXPECT_EQ(r.messages, 3u);
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_EQ(r.failures, 0u);
}

TEST(KvTransfer, BadAddressFailsOnlyItsTransferAndSaysWhy) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  auto sender = make_sender();
  ASSERT_TRUE(receiver && sender);
  sender->send("abc", 1, make_message(1, 0, 20000));
  sender->send(receiver->address(), 2, make_message(2, 0, 20000));
  Status bad = sender->flush(1, 10s);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("kv transfer 1"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find(peer_label("abc")), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("hex address"), std::string::npos) << bad.message();
  Status good = sender->flush(2, 30s);
  EXPECT_TRUE(good.is_ok()) << good.message();
}

TEST(KvTransfer, FlushOfAnUnknownTransferIsOk) {
  auto sender = make_sender();
  ASSERT_TRUE(sender);
  EXPECT_TRUE(sender->flush(12345, 0ms).is_ok());
}

// The decode side goes away while the prefill side keeps sending: the sender's flushes end in
// errors within their timeouts and the sender shuts down promptly; nothing crashes or hangs.
// (In one process the peer's death cannot be seen on shared memory, where UCX learns of it by
// checking that the peer process still exists: here the errors are timeouts. Between processes
// see KvTransferTwoProcesses.FlushToAKilledReceiverFailsWithinTheTimeout.)
TEST(KvTransfer, ReceiverDestroyedWhileSenderSends) {
  Inbox inbox;
  auto receiver = make_receiver(inbox);
  auto sender = make_sender();
  ASSERT_TRUE(receiver && sender);
  const std::string address = receiver->address();
  for (int i = 0; i < 4; ++i) sender->send(address, 1, make_message(1, i, 1 << 20));
  ASSERT_TRUE(sender->flush(1, 30s).is_ok());
  std::atomic<bool> done{false};
  std::thread pump([&] {
    for (int i = 0; !done.load(); ++i) {
      sender->send(address, 2, make_message(2, i, 512 << 10));
      std::this_thread::sleep_for(1ms);
    }
  });
  ASSERT_TRUE(inbox.wait_for(8, 30s));
  receiver.reset();
  std::this_thread::sleep_for(50ms);
  done = true;
  pump.join();
  auto t0 = std::chrono::steady_clock::now();
  Status st = sender->flush(2, 2s);
  EXPECT_FALSE(st.is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(st.message().find(peer_label(address)), std::string::npos) << st.message();
  sender->send(address, 3, make_message(3, 0, 16 << 10));
  Status again = sender->flush(3, 1s);
  EXPECT_FALSE(again.is_ok());
  EXPECT_NE(again.message().find(peer_label(address)), std::string::npos) << again.message();
  // Messages still in flight are failed by the destructor after its grace time.
  t0 = std::chrono::steady_clock::now();
  sender.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

}  // namespace
}  // namespace deepinfer::transfer
