// EpGroup over Open MPI (compiled only when CMake finds MPI). Every collective point starts
// with an allgather of a small header (what each rank is doing), so that a rank waiting at the
// step barrier can see that others are in a MoE layer and join it with zero rows.
// The C API only (Open MPI's C++ bindings are deprecated and warn).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "deepinfer/base/check.h"
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::parallel {
namespace {

enum Kind : int32_t { kBarrier = 0, kMoeLayer = 1 };
struct Header {
  int32_t kind, layer, have_work, width;  // width: floats per row (the hidden size) of a MoE layer
};
constexpr int kHeaderInts = 4;

class MpiEpGroup final : public EpGroup {
 public:
  MpiEpGroup(int rank, int size) : rank_(rank), size_(size) {}
  ~MpiEpGroup() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void exchange(int layer, const int32_t* dest, const float* x, int64_t n, int64_t hidden,
                float* y) override {
    const std::vector<Header> all =
        gather_headers({kMoeLayer, layer, 1, static_cast<int32_t>(hidden)});
    for (const Header& h : all)
      DI_CHECK(h.kind != kMoeLayer || h.layer == layer,
               "expert parallel: ranks out of step (MoE layer {} vs {})", layer, h.layer);
    run_layer(layer, dest, x, n, hidden, y);
  }

  bool step_barrier(bool have_work) override {
    for (;;) {
      const std::vector<Header> all = gather_headers({kBarrier, -1, have_work ? 1 : 0, 0});
      int layer = -1, width = 0;
      bool any_work = false;
      for (const Header& h : all) {
        if (h.kind == kMoeLayer) layer = h.layer, width = h.width;
        any_work = any_work || h.have_work;
      }
      if (layer < 0) return any_work;
      run_layer(layer, nullptr, nullptr, 0, width,
                nullptr);  // serve the others' layer with no rows of ours
    }
  }

  std::vector<std::string> gather_to_root(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_, 0);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) displs[r] = total, total += rank_ == 0 ? lens[r] : 0;
    std::string all(size_t(total), '\0');
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                MPI_COMM_WORLD);
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(displs[r]), size_t(lens[r])));
    return out;
  }

  bool all(bool mine) override {
    int v = mine ? 1 : 0, out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out == 1;
  }

  std::string broadcast(const std::string& mine, bool idle) override {
    int64_t len = rank_ == 0 ? int64_t(mine.size()) : 0;
    MPI_Request req;
    MPI_Ibcast(&len, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req);
    if (idle && rank_ != 0) {
      auto nap = std::chrono::microseconds(50);
      for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(5000));
      }
    } else {
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    DI_CHECK(len >= 0 && len < (int64_t{1} << 31), "expert parallel: broadcast of {} bytes", len);
    std::string out = rank_ == 0 ? mine : std::string(size_t(len), '\0');
    if (len > 0) MPI_Bcast(out.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
    return out;
  }

 private:
  std::vector<Header> gather_headers(Header mine) {
    std::vector<Header> all(size_);
    MPI_Allgather(&mine, kHeaderInts, MPI_INT, all.data(), kHeaderInts, MPI_INT, MPI_COMM_WORLD);
    return all;
  }

  // Dispatch rows to their slots' ranks, run the local experts on what arrives, send the
  // outputs back into y in the caller's row order.
  void run_layer(int layer, const int32_t* dest, const float* x, int64_t n, int64_t h, float* y) {
    const int per_rank = placement_.slots_per_rank();
    std::vector<int> send_rows(size_, 0), recv_rows(size_, 0);
    for (int64_t i = 0; i < n; ++i) ++send_rows[dest[i] / per_rank];
    MPI_Alltoall(send_rows.data(), 1, MPI_INT, recv_rows.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> sdispl(size_, 0), rdispl(size_, 0);
    int64_t n_recv = 0;
    for (int r = 0; r < size_; ++r) {
      sdispl[r] = r ? sdispl[r - 1] + send_rows[r - 1] : 0;
      rdispl[r] = r ? rdispl[r - 1] + recv_rows[r - 1] : 0;
      n_recv += recv_rows[r];
    }
    // Rows ordered by destination rank (stable: the caller's order within a rank).
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::vector<int> fill = sdispl;
    for (int64_t i = 0; i < n; ++i) order[size_t(fill[dest[i] / per_rank]++)] = i;
    std::vector<int32_t> send_slots(static_cast<size_t>(n)),
        recv_slots(static_cast<size_t>(n_recv));
    for (int64_t j = 0; j < n; ++j) send_slots[size_t(j)] = dest[order[size_t(j)]];
    MPI_Alltoallv(send_slots.data(), send_rows.data(), sdispl.data(), MPI_INT, recv_slots.data(),
                  recv_rows.data(), rdispl.data(), MPI_INT, MPI_COMM_WORLD);
    DI_CHECK(n_recv * h < (int64_t{1} << 31) && n * h < (int64_t{1} << 31),
             "expert parallel: batch too large");
    std::vector<float> send_x(size_t(n * h)), recv_x(size_t(n_recv * h)),
        recv_y(size_t(n_recv * h)), send_y(size_t(n * h));
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(send_x.data() + j * h, x + order[size_t(j)] * h, sizeof(float) * size_t(h));
    auto scaled = [h](const std::vector<int>& v) {
      std::vector<int> s(v.size());
      for (size_t i = 0; i < v.size(); ++i) s[i] = static_cast<int>(v[i] * h);
      return s;
    };
    const std::vector<int> sc = scaled(send_rows), sd = scaled(sdispl), rc = scaled(recv_rows),
                           rd = scaled(rdispl);
    MPI_Alltoallv(send_x.data(), sc.data(), sd.data(), MPI_FLOAT, recv_x.data(), rc.data(),
                  rd.data(), MPI_FLOAT, MPI_COMM_WORLD);
    count_rows(layer, recv_slots.data(), n_recv);
    if (n_recv > 0) local_(layer, recv_slots.data(), recv_x.data(), n_recv, recv_y.data());
    MPI_Alltoallv(recv_y.data(), rc.data(), rd.data(), MPI_FLOAT, send_y.data(), sc.data(),
                  sd.data(), MPI_FLOAT, MPI_COMM_WORLD);
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(y + order[size_t(j)] * h, send_y.data() + j * h, sizeof(float) * size_t(h));
  }

  int rank_, size_;
};

}  // namespace

bool EpGroup::launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

bool EpGroup::available() { return true; }

Result<std::unique_ptr<EpGroup>> EpGroup::init(int expected_ranks) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto g = std::make_unique<MpiEpGroup>(rank, size);  // finalizes MPI on every return path
  if (size != expected_ranks)
    return invalid_argument("--ep {}: this MPI job has {} ranks (start it with mpirun -n {})",
                            expected_ranks, size, expected_ranks);
  return std::unique_ptr<EpGroup>(std::move(g));
}

}  // namespace deepinfer::parallel
