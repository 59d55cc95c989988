// Host memory for the CPU backend's own buffers: a growable byte buffer on a cache-line
// boundary (prepared activations) and an arena on transparent huge pages (repacked weights).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace th::cpu {

inline constexpr std::align_val_t kLineAlign{64};  // a cache line; also what AVX-512 loads like

// A growable byte buffer on a cache-line boundary. The prepared Q4_0 activations are read
// 32 bytes at a time at offsets that stay within a line only from a 64-byte boundary: from
// a std::vector's 16, half the loads straddle two lines and the batch-32 kernel ran 20%
// slower (perf samples of the tile, one thread).
class AlignedBytes {
 public:
  uint8_t* reserve(size_t n) {
    if (n > size_) {
      data_.reset(static_cast<uint8_t*>(::operator new[](n, kLineAlign)));
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, kLineAlign); }
  };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
};

// Memory for the repacked weights, handed out from slabs of 64 MiB (or one matrix's size)
// on 2 MiB boundaries that the kernel is asked to back with transparent huge pages
// (MADV_HUGEPAGE; THP is often "madvise" only). A one-token matmul streams every byte once
// and its prefetches run 8 KiB ahead, two 4 KiB pages: on 4 KiB pages each page is a TLB miss,
// and in a VM a nested page walk. Freed with the backend.
class HugePageArena {
 public:
  uint8_t* allocate(size_t n) {
    n = (n + kLine - 1) / kLine * kLine;
    if (slabs_.empty() || used_ + n > slab_size_) {
      slab_size_ = std::max(kSlab, (n + kHuge - 1) / kHuge * kHuge);
      void* p = std::aligned_alloc(kHuge, slab_size_);
      if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
      (void)::madvise(p, slab_size_, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages as before
#endif
      slabs_.emplace_back(static_cast<uint8_t*>(p));
      used_ = 0;
    }
    uint8_t* out = slabs_.back().get() + used_;
    used_ += n;
    return out;
  }

 private:
  static constexpr size_t kLine = 64, kHuge = size_t{2} << 20, kSlab = size_t{64} << 20;
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, Free>> slabs_;
  size_t slab_size_ = 0, used_ = 0;
};

}  // namespace th::cpu
