// A heap buffer aligned for 512-bit vector loads, zero-filled. Move-only.
//
// Buffers of at least kLargeBytes (KV cache pools, big scratch) are anonymous memory maps instead:
// - the kernel hands out zero pages as they are first touched, so a 16 GiB KV pool costs nothing
//   at start-up (a memset of the default 1 GiB pool took 2 s per process) and only the blocks in
//   use ever become resident;
// - they are aligned to 2 MiB and advised MADV_HUGEPAGE: attention walks each sequence's KV
//   blocks scattered over hundreds of MB, and with 4 KiB pages nearly every block costs TLB
//   misses. Where transparent huge pages are off the advice is ignored.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace deepinfer {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kLargeBytes = size_t{2} << 20;  // also the huge page size
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { resize(count); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        mapped_bytes_(std::exchange(o.mapped_bytes_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { release(); }

  // Discards contents; the new buffer reads as zeros.
  void resize(size_t count) {
    release();
    size_ = count;
    if (count == 0) return;
    const size_t want = count * sizeof(T);
    if (want >= kLargeBytes) {
      map_large(want);
      return;
    }
    const size_t bytes = (want + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
    if (!data_) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  // Maps want bytes rounded up to 2 MiB, at a 2 MiB boundary (over-map by 2 MiB, trim the ends).
  void map_large(size_t want) {
    const size_t bytes = (want + kLargeBytes - 1) / kLargeBytes * kLargeBytes;
    void* p = mmap(nullptr, bytes + kLargeBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (base + kLargeBytes - 1) / kLargeBytes * kLargeBytes;
    if (aligned > base) munmap(p, aligned - base);
    const size_t tail = base + bytes + kLargeBytes - (aligned + bytes);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    (void)madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
    data_ = reinterpret_cast<T*>(aligned);
    mapped_bytes_ = bytes;
  }
  void release() {
    if (mapped_bytes_ > 0) munmap(static_cast<void*>(data_), mapped_bytes_);
    else std::free(data_);
    data_ = nullptr;
    size_ = 0;
    mapped_bytes_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // > 0: data_ is an anonymous map of this many bytes
};

}  // namespace deepinfer
