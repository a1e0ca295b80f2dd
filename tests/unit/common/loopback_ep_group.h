// Two expert-parallel ranks in one process: each rank's model holds its own experts, and a MoE
// layer's exchange runs every row on the rank holding its slot by calling that rank's local
// experts directly (the other rank's model need not be stepping).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::testing {

class LoopbackGroup final : public parallel::EpGroup {
 public:
  LoopbackGroup(int rank, LoopbackGroup* other) : rank_(rank), other_(other) {}
  void set_other(LoopbackGroup* o) { other_ = o; }
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void exchange(int layer, const int32_t* dest, const float* x, int64_t n, int64_t hidden,
                float* y) override {
    ++exchanges;
    // Every row goes to the rank holding its slot, in the caller's order, one call per rank.
    const int per = placement_.slots_per_rank();
    for (int r = 0; r < 2; ++r) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < n; ++i)
        if (dest[i] / per == r) rows.push_back(i);
      if (rows.empty()) continue;
      std::vector<int32_t> slots;
      std::vector<float> xs, ys(rows.size() * size_t(hidden));
      for (int64_t i : rows) {
        slots.push_back(dest[i]);
        xs.insert(xs.end(), x + i * hidden, x + (i + 1) * hidden);
      }
      LoopbackGroup& g = r == rank_ ? *this : *other_;
      g.rows_run += int64_t(rows.size());
      g.local_(layer, slots.data(), xs.data(), int64_t(rows.size()), ys.data());
      for (size_t j = 0; j < rows.size(); ++j)
        std::copy(ys.begin() + j * hidden, ys.begin() + (j + 1) * hidden, y + rows[j] * hidden);
    }
  }
  bool step_barrier(bool have_work) override { return have_work; }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return {mine}; }
  bool all(bool mine) override { return mine; }
  std::string broadcast(const std::string& mine, bool) override { return mine; }

  int exchanges = 0;     // MoE layers this rank dispatched
  int64_t rows_run = 0;  // rows this rank's experts computed

 private:
  int rank_;
  LoopbackGroup* other_;
};

}  // namespace deepinfer::testing
