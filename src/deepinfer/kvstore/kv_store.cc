// KvStore: tiers, the background writer (bounded queue, drop when full), the prefetch reader
// and the periodic sweeper.
#include "deepinfer/kvstore/kv_store.h"

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

#include "deepinfer/base/log.h"
#include "deepinfer/kvstore/host_tier.h"

namespace deepinfer::kvstore {

struct KvStore::Impl {
  explicit Impl(size_t host_bytes) : host(host_bytes) {}
  HostTier host;
  std::unique_ptr<SsdTier> ssd;

  std::mutex fg_mu;  // the foreground IoEngine serves one batch_get at a time
  std::unique_ptr<IoEngine> fg_io;

  struct WriteJob {
    BlockKey key;
    BlockBytes value;
    TrafficClass traffic_class;
    EntryKind kind;
  };
  std::mutex wq_mu;
  std::condition_variable wq_cv, wq_idle_cv;
  std::deque<WriteJob> wq;
  size_t writes_in_flight = 0;
  bool stop = false;
  std::thread writer;

  std::mutex rq_mu;
  std::condition_variable rq_cv;
  std::deque<std::packaged_task<size_t(IoEngine&)>> rq;
  std::thread reader;

  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  std::thread sweeper;

  std::atomic<uint64_t> host_hits{0}, ssd_hits{0}, misses{0}, puts{0}, puts_dropped{0},
      swept_expired{0}, swept_evicted{0};
};

Result<std::unique_ptr<KvStore>> KvStore::open(KvStoreConfig cfg) {
  if (cfg.block_bytes == 0) return invalid_argument("kvstore: block_bytes must be > 0");
  if (cfg.write_queue_depth == 0) return invalid_argument("kvstore: write_queue_depth must be > 0");
  const int n = static_cast<int>(cfg.targets.size());
  const bool automatic = cfg.data_shards == 0;
  if (n > 0 && cfg.data_shards == 0) {
    int m = cfg.parity_shards >= 0 ? cfg.parity_shards : (n >= 12 ? 2 : std::min(2, n - 1));
    cfg.parity_shards = m;
    cfg.data_shards = n >= 12 && m == 2 ? 10 : std::max(1, std::min(n - m, 10));
  } else if (n > 0 && cfg.parity_shards < 0) {
    cfg.parity_shards = std::min(2, n - cfg.data_shards);
  }
  std::unique_ptr<KvStore> store(new KvStore(cfg));
  Impl& im = *store->impl_;
  if (n > 0) {
    SsdTierOptions o;
    o.targets = cfg.targets;
    o.data_shards = cfg.data_shards;
    o.parity_shards = cfg.parity_shards;
    o.block_bytes = cfg.block_bytes;
    std::copy(std::begin(cfg.ttl_seconds), std::end(cfg.ttl_seconds), o.ttl_seconds);
    o.target_capacity_bytes = cfg.target_capacity_bytes;
    o.touch_interval_s = cfg.touch_interval_s;
    o.io_mode = cfg.io_mode;
    o.direct_io = cfg.direct_io;
    o.sync_writes = cfg.sync_writes;
    o.coding_from_manifest = automatic;
    o.replace_unreadable_after_s = cfg.replace_unreadable_after_s;
    o.repair_per_sweep = cfg.repair_per_sweep;
    DI_ASSIGN_OR_RETURN(im.ssd, SsdTier::open(std::move(o)));
    // An existing store keeps the coding it was created with.
    store->cfg_.data_shards = im.ssd->code().data_shards();
    store->cfg_.parity_shards = im.ssd->code().parity_shards();
  }
  KvStore* self = store.get();
  im.fg_io = std::make_unique<IoEngine>(cfg.io_mode, cfg.direct_io, n);
  im.writer = std::thread([self, &im] {
    IoEngine io(self->cfg_.io_mode, self->cfg_.direct_io, static_cast<int>(self->cfg_.targets.size()));
    std::unique_lock lock(im.wq_mu);
    while (true) {
      im.wq_cv.wait(lock, [&] { return im.stop || !im.wq.empty(); });
      if (im.wq.empty()) break;  // stop requested and drained
      std::vector<Impl::WriteJob> jobs;
      while (!im.wq.empty() && jobs.size() < 32) {
        jobs.push_back(std::move(im.wq.front()));
        im.wq.pop_front();
      }
      im.writes_in_flight = jobs.size();
      lock.unlock();
      std::vector<PutItem> items(jobs.size());
      for (size_t i = 0; i < jobs.size(); ++i) {
        items[i] = PutItem{jobs[i].key, jobs[i].value->data(), jobs[i].traffic_class, jobs[i].kind};
      }
      std::vector<bool> ok;
      im.ssd->put_batch(io, items, self->now(), &ok);
      lock.lock();
      im.writes_in_flight = 0;
      im.wq_idle_cv.notify_all();
    }
  });
  im.reader = std::thread([self, &im] {
    IoEngine io(self->cfg_.io_mode, self->cfg_.direct_io, static_cast<int>(self->cfg_.targets.size()));
    std::unique_lock lock(im.rq_mu);
    while (true) {
      im.rq_cv.wait(lock, [&] { return im.stop || !im.rq.empty(); });
      if (im.rq.empty()) break;
      auto task = std::move(im.rq.front());
      im.rq.pop_front();
      lock.unlock();
      task(io);
      lock.lock();
    }
  });
  if (im.ssd && cfg.sweep_interval_s > 0) {
    im.sweeper = std::thread([self, &im] {
      std::unique_lock lock(im.sweep_mu);
      auto period = std::chrono::duration<double>(self->cfg_.sweep_interval_s);
      while (!im.sweep_cv.wait_for(lock, period, [&] { return im.stop; })) {
        lock.unlock();
        self->sweep_now();
        lock.lock();
      }
    });
  }
  return store;
}

KvStore::KvStore(KvStoreConfig config)
    : cfg_(std::move(config)), impl_(std::make_unique<Impl>(cfg_.host_tier_bytes)) {}

KvStore::~KvStore() {
  Impl& im = *impl_;
  {
    std::scoped_lock lock(im.wq_mu, im.rq_mu, im.sweep_mu);
    im.stop = true;
  }
  im.wq_cv.notify_all();
  im.rq_cv.notify_all();
  im.sweep_cv.notify_all();
  if (im.writer.joinable()) im.writer.join();
  if (im.reader.joinable()) im.reader.join();
  if (im.sweeper.joinable()) im.sweeper.join();
}

int KvStore::data_shards() const { return impl_->ssd ? cfg_.data_shards : 0; }
int KvStore::parity_shards() const { return impl_->ssd ? cfg_.parity_shards : 0; }

int64_t KvStore::now() const {
  return cfg_.clock ? cfg_.clock() : static_cast<int64_t>(::time(nullptr));
}

std::string KvStore::store_id() const { return impl_->ssd ? impl_->ssd->store_id() : std::string(); }

size_t KvStore::batch_exists(std::span<const BlockKey> keys) {
  const int64_t t = now();
  size_t i = 0;
  for (; i < keys.size(); ++i) {
    if (impl_->host.contains(keys[i], t)) continue;
    if (impl_->ssd && impl_->ssd->exists(keys[i], t)) continue;
    break;
  }
  return i;
}

size_t KvStore::host_prefix_length(std::span<const BlockKey> keys) {
  const int64_t t = now();
  size_t i = 0;
  while (i < keys.size() && impl_->host.contains(keys[i], t)) ++i;
  return i;
}

size_t KvStore::load_prefix(IoEngine& io, std::span<const BlockKey> keys,
                            std::span<uint8_t* const> dst, std::optional<TrafficClass> reader) {
  Impl& im = *impl_;
  const int64_t t = now();
  size_t h = 0;
  while (h < keys.size() && im.host.get(keys[h], dst[h], cfg_.block_bytes, t)) ++h;
  im.host_hits += h;
  if (h == keys.size()) return h;
  if (!im.ssd) {
    im.misses++;
    return h;
  }
  std::vector<bool> hit;
  std::vector<TrafficClass> classes;
  im.ssd->get_batch(io, keys.subspan(h), dst.subspan(h), t, &hit, &classes, reader);
  size_t n = h;
  while (n < keys.size() && hit[n - h]) {
    // Promote to RAM: the next request for this prefix should not touch the SSD.
    auto copy = std::make_shared<std::vector<uint8_t>>(dst[n], dst[n] + cfg_.block_bytes);
    im.host.put(keys[n], std::move(copy), im.ssd->ttl_for(classes[n - h], reader), t);
    ++n;
  }
  im.ssd_hits += n - h;
  if (n < keys.size()) im.misses++;
  return n;
}

size_t KvStore::batch_get(std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                          std::optional<TrafficClass> reader) {
  if (dst.size() < keys.size()) return 0;
  std::lock_guard lock(impl_->fg_mu);
  return load_prefix(*impl_->fg_io, keys, dst, reader);
}

std::future<size_t> KvStore::prefetch(std::vector<BlockKey> keys, std::optional<TrafficClass> reader) {
  Impl& im = *impl_;
  std::packaged_task<size_t(IoEngine&)> task([this, reader, keys = std::move(keys)](IoEngine& io) {
    Impl& im = *impl_;
    const int64_t t = now();
    size_t h = 0;
    while (h < keys.size() && im.host.contains(keys[h], t)) ++h;
    if (h == keys.size() || !im.ssd) return h;
    // Read the rest in chunks through scratch blocks (bounded memory, whatever the prefix
    // length); load_prefix promotes hits into the host tier.
    const size_t chunk = std::max<size_t>(1, (size_t{64} << 20) / cfg_.block_bytes);
    std::vector<std::vector<uint8_t>> scratch(std::min(chunk, keys.size() - h),
                                              std::vector<uint8_t>(cfg_.block_bytes));
    std::vector<uint8_t*> ptrs(scratch.size());
    for (size_t i = 0; i < scratch.size(); ++i) ptrs[i] = scratch[i].data();
    while (h < keys.size()) {
      const size_t n = std::min(scratch.size(), keys.size() - h);
      const size_t got = load_prefix(io, std::span<const BlockKey>(keys.data() + h, n),
                                     std::span<uint8_t* const>(ptrs.data(), n), reader);
      h += got;
      if (got < n) break;
    }
    return h;
  });
  auto fut = task.get_future();
  {
    std::lock_guard lock(im.rq_mu);
    im.rq.push_back(std::move(task));
  }
  im.rq_cv.notify_one();
  return fut;
}

size_t KvStore::batch_put(std::span<const BlockKey> keys, std::span<const uint8_t* const> src,
                          TrafficClass traffic_class, EntryKind kind) {
  Impl& im = *impl_;
  const int64_t t = now();
  const int64_t ttl = cfg_.ttl_seconds[static_cast<int>(traffic_class)];
  size_t queued = 0;
  // Checkpoint parts are useful only whole and only next to their blocks: they may take at
  // most half the SSD write queue, all parts of a put or none, so a burst of them never
  // crowds out the blocks they describe.
  const bool checkpoint = kind == EntryKind::kSwaCheckpoint;
  bool ssd_room = true;
  if (checkpoint && im.ssd) {
    std::lock_guard lock(im.wq_mu);
    ssd_room = im.wq.size() + keys.size() <= cfg_.write_queue_depth / 2;
  }
  for (size_t i = 0; i < keys.size() && i < src.size(); ++i) {
    auto value = std::make_shared<const std::vector<uint8_t>>(src[i], src[i] + cfg_.block_bytes);
    im.host.put(keys[i], value, ttl, t);
    im.puts++;
    if (!im.ssd) {
      ++queued;
      continue;
    }
    if (!ssd_room) {
      im.puts_dropped++;
      continue;
    }
    {
      std::lock_guard lock(im.wq_mu);
      if (im.wq.size() >= cfg_.write_queue_depth) {
        im.puts_dropped++;
        continue;
      }
      im.wq.push_back({keys[i], std::move(value), traffic_class, kind});
    }
    ++queued;
    im.wq_cv.notify_one();
  }
  return queued;
}

void KvStore::remove(const BlockKey& key) {
  impl_->host.erase(key);
  if (impl_->ssd) impl_->ssd->remove(key);
}

void KvStore::flush() {
  Impl& im = *impl_;
  std::unique_lock lock(im.wq_mu);
  im.wq_idle_cv.wait(lock, [&] { return im.wq.empty() && im.writes_in_flight == 0; });
}

SweepReport KvStore::sweep_now() {
  if (!impl_->ssd) return {};
  SweepReport r = impl_->ssd->sweep(now());
  impl_->swept_expired += r.expired_entries;
  impl_->swept_evicted += r.evicted_entries;
  if (r.expired_entries || r.evicted_entries || r.stale_temps) {
    log::debug("kvstore sweep: {} expired, {} evicted, {} stale temps", r.expired_entries,
               r.evicted_entries, r.stale_temps);
  }
  return r;
}

KvStoreStats KvStore::stats() const {
  const Impl& im = *impl_;
  KvStoreStats s;
  s.host_hits = im.host_hits;
  s.ssd_hits = im.ssd_hits;
  s.misses = im.misses;
  s.puts = im.puts;
  s.puts_dropped = im.puts_dropped;
  {
    std::lock_guard lock(const_cast<Impl&>(im).wq_mu);
    s.write_queue_depth = im.wq.size() + im.writes_in_flight;
  }
  s.host_bytes = im.host.bytes();
  s.host_entries = im.host.entries();
  s.host_evictions = im.host.evictions();
  s.swept_expired = im.swept_expired;
  s.swept_evicted = im.swept_evicted;
  s.io_uring = im.fg_io && im.fg_io->using_uring();
  if (im.ssd) s.ssd = im.ssd->stats();
  return s;
}

}  // namespace deepinfer::kvstore
