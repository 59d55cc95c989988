// The fast CPU backend: every op split across a pool of threads created once,
// matrix products through the kernel registry (activations converted once,
// then each thread streams its own rows of the weight matrix), fused
// online-softmax attention, and vectorized elementwise ops. Checked op by op
// against the reference backend (tests/unit/backend/backend_ops_test.cpp).
//
// Work is handed out in chunks claimed from an atomic counter rather than in
// fixed per-thread ranges: on a shared machine a preempted thread would
// otherwise hold up the whole op, while with about four chunks per thread the
// others take over its share. Matmul rows go by WorkRanges instead (contiguous
// per thread, stolen by halves at the end: the same protection, without a
// counter's cache line moving between cores per chunk). Repacked weights live
// on transparent huge pages (HugePageArena, host_memory.h).
#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention_parts.h"
#include "backend/cpu/host_memory.h"
#include "backend/cpu/kernel_select.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/rope_cache.h"
#include "backend/cpu/vec_ops.h"
#include "base/cpu_set.h"
#include "base/thread_pool.h"
#include "base/work_ranges.h"
#include "tensor/quant.h"

namespace th {

namespace {

using cpu::Isa;

// Elementwise ops on fewer floats than this run on the calling thread alone:
// 32 Ki floats (128 KiB) take about 10 us to stream on one core, several times
// what waking the pool and waiting at its barrier cost (1-10 us measured on
// 2 shared cores).
constexpr int64_t kParallelMinFloats = int64_t{1} << 15;

// Waits until done is set: pausing between polls, then, after 1024 pauses (~20 us on Zen 5,
// ~50 us where a PAUSE takes 140 cycles), yielding: another thread may hold the CPU that the
// setter needs (ThreadPool's waits do the same).
inline void spin_until(const std::atomic<bool>& done) {
  for (int i = 0; !done.load(std::memory_order_acquire); ++i) {
    if (i >= 1024) {
      std::this_thread::yield();
      continue;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// Matmul scheduling (parallel_ranges): each thread takes the rows of its own contiguous
// range in pieces (a quarter of what it has left), then steals half of another's; pieces are
// multiples of 16 rows (kernels work on tiles of 4 or 8 rows). Other parallel loops take
// about four chunks per thread from a shared counter. When the batch is bigger than one
// token tile, a piece is also capped at 128 KiB of weights and the tokens are
// taken 64 at a time: 64 tokens' Q8_0 activations of a 2048-wide row are
// 136 KiB, so chunk and tile together stay within Zen 3's 512 KiB L2, and each
// weight byte brought into L2 serves 64 tokens.
constexpr int64_t kChunkRowMultiple = 16;
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kTokenTile = 64;
constexpr size_t kWeightChunkBytes = size_t{128} << 10;
// The least a thread steals from another's range in a one-token matmul: 3 grains (48 rows, a
// remainder under 96 stays with its owner). A steal costs each side a cache line's trip between
// the cores (~0.3-1 us on the 2-vCPU Zen 5 VM, twice: the victim's next claim fetches the line
// back), about what the last grains take: 1.1B q2_K decode, in-process A/B over 5 runs, matmul
// regions 75.8-84.5 -> 73.8-80.0 us, a step 0.950-0.989x the time (q3_K's: 0.965-1.035x).
// A batch's rows are worth stealing to the last grain.
constexpr int64_t kMinStealRowsOneToken = 48;
// Dequantize-and-dot fallback: rows dequantized at a time, 4 to 64 of them. For
// a few tokens, up to 16 KiB of f32, so the rows are still in L1 (32 KiB on
// Zen 3) when the dot products read them back; for a batch, up to 128 KiB,
// which stays in L2 while every token's activations stream past.
constexpr int64_t kFallbackFewTokens = 8;
constexpr size_t kFallbackBlockBytesFew = size_t{16} << 10;
constexpr size_t kFallbackBlockBytesMany = size_t{128} << 10;

// The decode-step prefetches (prefetch_attention, prefetch_products) run for steps of at most
// this many tokens: a batch's products are bound by compute, not by the weights' stream.
constexpr int64_t kPrefetchMaxTokens = 4;

// prefetch_attention: at most 64 KiB of K/V rows, a sixteenth of a Zen 5 core's L2 (an eighth
// of Zen 3's), which the q/k/v products' weights stream through meanwhile; longer contexts
// rely on the attention kernel's prefetch of its next tile.
constexpr size_t kPrefetchKvBytes = size_t{64} << 10;

// prefetch_products: at most this much of each waiting thread's next rows (half of a Zen 4 or
// Zen 5 core's 1 MiB L2).
constexpr size_t kPrefetchProductBytes = size_t{512} << 10;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : isa_(o.isa ? *o.isa : cpu::best_isa()),
        ops_(&cpu::vec_ops(isa_)),
        pool_(o.n_threads > 0 ? o.n_threads : allowed_physical_cores(), o.pin),
        weight_scratch_(static_cast<size_t>(pool_.size())),
        attention_scratch_(static_cast<size_t>(pool_.size())),
        repack_(o.repack_weights && !env_is_zero("TOKENHIVE_REPACK")),
        prefetch_products_(!env_is_zero("TOKENHIVE_PREFETCH_NEXT")) {
    if (!cpu::has_isa(isa_)) {
      std::fprintf(stderr, "tokenhive: the CPU backend was asked for ISA %s, which this CPU lacks\n",
                   std::string(cpu::isa_name(isa_)).c_str());
      std::abort();
    }
  }

  std::string_view name() const override { return "cpu"; }

  float* alloc(int64_t n) override {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    auto* p = static_cast<float*>(::operator new[](bytes, cpu::kLineAlign));
    std::memset(p, 0, bytes);
    return p;
  }
  void free(float* p) override { ::operator delete[](p, cpu::kLineAlign); }
  void read(const float* src, float* dst, int64_t n) override {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }

  WeightView prepare_weight(const WeightView& w) override {
    const cpu::MatmulKernel* k = cpu::select_matmul_kernel(w.type, isa_);
    if (!repack_ || !k || !k->pack_rows || w.packed || w.rows <= 0 || w.cols % dtype_info(k->act).block_size != 0)
      return w;
    const size_t w_rb = row_bytes(w.type, w.cols), packed_rb = cpu::packed_row_bytes(*k, w_rb);
    const size_t bytes = packed_rb * static_cast<size_t>(w.rows);
    uint8_t* out = packed_weights_.allocate(bytes);
    const auto* in = static_cast<const uint8_t*>(w.data);
    const int64_t per = chunk_rows(w.rows, w_rb, 1);
    parallel_chunks(ceil_div(w.rows, per), [&](int64_t c, int) {
      k->pack_rows(in, w_rb, w.cols, c * per, std::min(w.rows, (c + 1) * per), out, packed_rb);
    });
    packed_bytes_ += bytes;
    WeightView v = w;
    v.packed = out;
    return v;
  }
  size_t prepared_weight_bytes() const override { return packed_bytes_; }

  void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens) override {
    if (n_tokens <= 0 || w.rows <= 0) return;
    if (const cpu::MatmulKernel* k = kernel_for(w)) {
      const MatmulJob job[] = {{&w, y}};
      matmul_kernel(*k, job, x, n_tokens);
    } else {
      matmul_fallback(w, x, y, n_tokens);
    }
  }
  // Matrices of one type and width share a kernel: x converted once and all their rows in one
  // parallel region (one pool wake-up and one join instead of one per matrix).
  void matmuls(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens) override {
    if (n_tokens <= 0 || jobs.empty()) return;
    const cpu::MatmulKernel* k = kernel_for(*jobs[0].w);
    if (k && one_region(jobs).size() == jobs.size())
      matmul_kernel(*k, jobs, x, n_tokens);
    else
      Backend::matmuls(jobs, x, n_tokens);
  }

  void embed(const WeightView& w, const int32_t* ids, int64_t n, float* out) override {
    const size_t rb = row_bytes(w.type, w.cols);
    const auto* base = static_cast<const uint8_t*>(w.data);
    parallel_rows(n, w.cols, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        ops_->to_f32(w.type, base + static_cast<size_t>(ids[i]) * rb, 0, w.cols, out + i * w.cols);
    });
  }

  void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim, float eps) override {
    parallel_rows(n_rows, dim, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) ops_->rmsnorm(x + r * dim, weight, y + r * dim, dim, eps);
    });
  }

  void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
            const RopeParams& p) override {
    const cpu::RopeCache::Angles a = rope_cache_.angles(p, pos, n_tokens);
    const int64_t half = p.rot_dim / 2;
    const bool neox = p.neox;
    parallel_rows(n_tokens, n_heads * head_dim, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* c = a.cos + t * half;
        const float* s = a.sin + t * half;
        for (int64_t h = 0; h < n_heads; ++h) {
          float* v = x + (t * n_heads + h) * head_dim;
          if (neox) {
            for (int64_t i = 0; i < half; ++i) {
              const float x0 = v[i], x1 = v[i + half];
              v[i] = x0 * c[i] - x1 * s[i];
              v[i + half] = x0 * s[i] + x1 * c[i];
            }
          } else {
            for (int64_t i = 0; i < half; ++i) {
              const float x0 = v[2 * i], x1 = v[2 * i + 1];
              v[2 * i] = x0 * c[i] - x1 * s[i];
              v[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
          }
        }
      }
    });
  }

  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    parallel_rows(n, 1, [&](int64_t i0, int64_t i1) { ops_->swiglu(gate + i0, up + i0, out + i0, i1 - i0); });
  }

  // GELU's tanh, soft-capping and the expert combine are elementwise over data that was
  // just written: bound by memory, so plain loops (vectorized by the compiler where it can).
  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    parallel_rows(n, 16, [&](int64_t i0, int64_t i1) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      for (int64_t i = i0; i < i1; ++i) {
        const float x = gate[i];
        out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
      }
    });
  }

  void softcap(float* y, int64_t n, float cap) override {
    parallel_rows(n, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = cap * std::tanh(y[i] / cap);
    });
  }

  void scale(float* y, int64_t n, float s) override {
    parallel_rows(n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] *= s;
    });
  }

  void add_rows_scaled(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                       int64_t dim) override {
    parallel_rows(n, dim, [&](int64_t r0, int64_t r1) {  // rows distinct: no two threads share a dst row
      for (int64_t r = r0; r < r1; ++r) {
        float* d = dst + static_cast<int64_t>(idx[r]) * dim;
        const float* x = src + r * dim;
        for (int64_t j = 0; j < dim; ++j) d[j] += w[r] * x[j];
      }
    });
  }

  void gather_rows(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) override {
    parallel_rows(n, dim, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(dst + i * dim, src + static_cast<int64_t>(idx[i]) * dim, static_cast<size_t>(dim) * sizeof(float));
    });
  }

  void add(float* y, const float* x, int64_t n) override {
    parallel_rows(n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] += x[i];
    });
  }

  void add_bias(float* y, const float* bias, int64_t n_rows, int64_t dim) override {
    parallel_rows(n_rows, dim, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* yr = y + r * dim;
        for (int64_t i = 0; i < dim; ++i) yr[i] += bias[i];
      }
    });
  }

  // The reference quantizer's bytes for every type, so the cache holds the same bytes as with
  // the reference backend: f16 (the default) by ops_->to_f16 (F16C: a 1.1B decode step's 22
  // writes took 3.2 us each with the scalar conversion), the others by quantize_row (the rows
  // are tiny next to the weights: kv_dim elements per token).
  void kv_write(const KvLayerView& kv, const AttentionBatch& b, const float* k, const float* v) override {
    const size_t rb = kv.row_bytes();
    parallel_rows(b.n_tokens, 2 * kv.kv_dim, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t at = static_cast<size_t>(b.token_slot[t]) * rb;
        if (kv.type == DType::F16) {  // the default cache: the same bytes, by F16C where there is one
          ops_->to_f16(k + t * kv.kv_dim, static_cast<uint8_t*>(kv.k) + at, kv.kv_dim);
          ops_->to_f16(v + t * kv.kv_dim, static_cast<uint8_t*>(kv.v) + at, kv.kv_dim);
          continue;
        }
        quantize_row(kv.type, k + t * kv.kv_dim, static_cast<uint8_t*>(kv.k) + at, kv.kv_dim);
        quantize_row(kv.type, v + t * kv.kv_dim, static_cast<uint8_t*>(kv.v) + at, kv.kv_dim);
      }
    });
  }

  void attention(const KvLayerView& kv, const AttentionBatch& b, const float* q, float* out, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim, float scale, const AttentionOptions& opt) override {
    const cpu::AttentionTask task{&kv, &b, q, out, n_heads, n_kv_heads, head_dim, scale, opt.window, opt.softcap};
    // Work in K/V elements read; a decode step of a small model is not worth waking the pool.
    int64_t work = 0;
    for (int64_t t = 0; t < b.n_tokens; ++t) work += (static_cast<int64_t>(b.token_pos[t]) + 1) * 2 * n_kv_heads * head_dim;
    attention_in_spans(task, work < kParallelMinFloats);
  }

  // A decode step's K/V rows come from memory (the weights streamed since the layer's last
  // step evicted them); started before the q/k/v products, they are in cache when attention
  // reads them. A 1.1B decode at 8-40 positions on the Zen 5 VM, in-process A/B over 6 runs:
  // attention 11-16 -> 8.5-11.7 us a layer, a decode step 0.98x the time (median).
  void prefetch_attention(const KvLayerView& kv, const AttentionBatch& b, int64_t window) override {
    if (b.n_tokens > kPrefetchMaxTokens) return;
    const size_t rb = kv.row_bytes();
    const auto* k = static_cast<const char*>(kv.k);
    const auto* v = static_cast<const char*>(kv.v);
    size_t budget = kPrefetchKvBytes;
    for (int64_t t = 0; t < b.n_tokens; ++t) {
      const int64_t pos = b.token_pos[t];  // its own row is written after this
      const std::span<const int32_t> table = b.seq_tables[static_cast<size_t>(b.token_seq[t])];
      for (int64_t p = window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0; p < pos; ++p) {
        if (budget < 2 * rb) return;
        budget -= 2 * rb;
        const size_t at = static_cast<size_t>(kv_slot(table, b.block_size, p)) * rb;
        for (size_t x = 0; x < rb; x += 64) {
          __builtin_prefetch(k + at + x);
          __builtin_prefetch(v + at + x);
        }
      }
    }
  }

  // A decode step's ops between two products (attention, rope, norms, the residual adds) run
  // on the calling thread alone while the other threads wait, and memory idles: the waiting
  // threads start on the next region's rows meanwhile, each the start of its own range. A
  // small gain: 1.1B decode on the Zen 4 VM at 34 GB/s probes, 0 / 512 KiB alternated in 4
  // rounds, % of the probe: q3_K 81-85 -> 85-89, q2_K 87-88 -> 88-90, IQ4_NL 75-89 -> 80-88.
  void prefetch_products(std::span<const MatmulJob> jobs, int64_t n_tokens) override {
    if (!prefetch_products_ || pool_.size() == 1 || jobs.empty() || n_tokens > kPrefetchMaxTokens) return;
    const cpu::MatmulKernel* k = kernel_for(*jobs[0].w);
    if (!k) return;
    pool_.join_posted();  // before the plan it reads changes
    const std::span<const MatmulJob> region = one_region(jobs);
    prefetch_rows_ = region_rows(region, prefetch_first_row_);
    prefetch_parts_.clear();
    for (const MatmulJob& j : region) prefetch_parts_.push_back({weight_rows(*k, *j.w), j.w->rows});
    pool_.post(prefetch_job_);
  }

  // A norm's weights (8 KiB at width 2048), read once a step, come from memory as well: 1.1B
  // decode on the Zen 5 VM, in-process A/B over 4 runs, rmsnorm 2.2-3.3 -> 1.2-2.1 us a call
  // (45 a step).
  void prefetch(const float* p, int64_t n) override {
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
  }

 private:
  // Each token's positions in spans of cpu::attention_span (from the window's start), a span
  // covering every kv head: its K/V rows are read whole and in order. With fewer tokens than
  // chunks the threads want (decode), the spans are the chunks and their parts are merged
  // after; otherwise a token is a chunk and merges its spans as it goes. Same order of
  // merging either way, so a token's result does not depend on its batch or the threads.
  void attention_in_spans(const cpu::AttentionTask& task, bool serial) {
    const AttentionBatch& b = *task.batch;
    const int64_t hd = task.head_dim, part_floats = task.n_heads * (hd + 2);
    span_first_.assign(1, 0);
    for (int64_t t = 0; t < b.n_tokens; ++t) {
      const int64_t n_pos = static_cast<int64_t>(b.token_pos[t]) + 1;
      const int64_t p_begin = task.window > 0 ? std::max<int64_t>(0, n_pos - task.window) : 0;
      span_first_.push_back(span_first_.back() + ceil_div(n_pos - p_begin, cpu::attention_span(n_pos - p_begin)));
    }
    auto span = [&](int64_t t, int64_t i, cpu::AttentionScratch& sc, float* part) {
      const int64_t n_pos = static_cast<int64_t>(b.token_pos[t]) + 1;
      const int64_t p_begin = task.window > 0 ? std::max<int64_t>(0, n_pos - task.window) : 0;
      const int64_t len = cpu::attention_span(n_pos - p_begin), lo = p_begin + i * len;
      ops_->attend_span(task, t, lo, std::min(n_pos, lo + len), sc, part);
    };
    auto first_span = [&](int64_t t) { return span_first_[static_cast<size_t>(t)]; };
    const int64_t n_spans = span_first_.back();
    const int64_t threads = serial ? 1 : pool_.size();
    if (b.n_tokens >= threads * kChunksPerThread || n_spans == b.n_tokens) {
      auto token = [&](int64_t t, int tid) {
        cpu::AttentionScratch& sc = attention_scratch_[static_cast<size_t>(tid)];
        sc.part.resize(static_cast<size_t>(part_floats));
        float* out_t = task.out + t * task.n_heads * hd;
        if (first_span(t + 1) - first_span(t) == 1) {
          // One span (a short context): its part is the state, as a merge into the empty state
          // would leave it, bit for bit (attention_parts.h); no state to clear and merge into.
          span(t, 0, sc, sc.part.data());
          return cpu::finish_attention_state(sc.part.data(), out_t, task.n_heads, hd);
        }
        sc.state.resize(static_cast<size_t>(part_floats));
        cpu::clear_attention_state(sc.state.data(), task.n_heads, hd);
        for (int64_t i = 0; i < first_span(t + 1) - first_span(t); ++i) {
          span(t, i, sc, sc.part.data());
          cpu::merge_attention_part(sc.state.data(), sc.part.data(), task.n_heads, hd);
        }
        cpu::finish_attention_state(sc.state.data(), out_t, task.n_heads, hd);
      };
      if (serial) {
        for (int64_t t = 0; t < b.n_tokens; ++t) token(t, 0);
      } else {
        parallel_chunks(b.n_tokens, token);
      }
      return;
    }
    span_parts_.resize(static_cast<size_t>(n_spans * part_floats));
    span_token_.resize(static_cast<size_t>(n_spans));
    for (int64_t t = 0; t < b.n_tokens; ++t)
      std::fill(span_token_.begin() + first_span(t), span_token_.begin() + first_span(t + 1), t);
    parallel_chunks(n_spans, [&](int64_t c, int tid) {
      const int64_t t = span_token_[static_cast<size_t>(c)];
      span(t, c - first_span(t), attention_scratch_[static_cast<size_t>(tid)], span_parts_.data() + c * part_floats);
    });
    std::vector<float>& state = attention_scratch_[0].state;
    state.resize(static_cast<size_t>(part_floats));
    for (int64_t t = 0; t < b.n_tokens; ++t) {
      cpu::clear_attention_state(state.data(), task.n_heads, hd);
      for (int64_t c = first_span(t); c < first_span(t + 1); ++c)
        cpu::merge_attention_part(state.data(), span_parts_.data() + c * part_floats, task.n_heads, hd);
      cpu::finish_attention_state(state.data(), task.out + t * task.n_heads * hd, task.n_heads, hd);
    }
  }

  // Runs f(chunk, thread index) for every chunk < n_chunks, chunks claimed in order from a
  // shared counter by whichever thread is free.
  template <class F>
  void parallel_chunks(int64_t n_chunks, F&& f) {
    if (n_chunks <= 0) return;
    if (pool_.size() == 1 || n_chunks == 1) {
      for (int64_t c = 0; c < n_chunks; ++c) f(c, 0);
      return;
    }
    next_chunk_.store(0, std::memory_order_relaxed);  // published to the workers by run()
    auto job = [&](int tid, int) {
      for (int64_t c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < n_chunks;) f(c, tid);
    };
    pool_.run(std::ref(job));  // a reference_wrapper: std::function stores it without allocating
  }

  // f(begin, end) over pieces of [0, n) that are multiples of grain (but the last) and at most
  // max_piece long (<= 0: no cap), after first() on the calling thread: each thread works
  // through its own contiguous range and then steals halves of at least min_steal items from
  // the others' (WorkRanges), so a thread's rows stream in order. The other threads are woken
  // before first() runs and wait for it to finish (their wake-up overlaps it).
  template <class First, class F>
  void parallel_ranges(int64_t n, int64_t grain, int64_t max_piece, int64_t min_steal, First&& first, F&& f) {
    if (n <= 0) return;
    if (pool_.size() == 1 || n <= grain) {
      first();
      const int64_t step = max_piece > 0 ? max_piece : n;
      for (int64_t b = 0; b < n; b += step) f(b, std::min(n, b + step));
      return;
    }
    ranges_.reset(n, grain, max_piece, min_steal);  // published to the workers by run()
    first_done_.store(false, std::memory_order_relaxed);  // published by run() too
    auto job = [&](int tid, int) {
      if (tid == 0) {
        first();
        first_done_.store(true, std::memory_order_release);
      } else {
        spin_until(first_done_);
      }
      int64_t b, e;
      while (ranges_.next(tid, &b, &e)) f(b, e);
    };
    pool_.run(std::ref(job));
  }

  // f(begin, end) over [0, n) items of item_floats floats each: on the caller alone when
  // small, else in kChunksPerThread chunks per thread.
  template <class F>
  void parallel_rows(int64_t n, int64_t item_floats, F&& f) {
    if (n <= 0) return;
    const int64_t threads = pool_.size();
    if (threads == 1 || n < 2 || n * item_floats < kParallelMinFloats) {
      f(int64_t{0}, n);
      return;
    }
    const int64_t per = ceil_div(n, threads * kChunksPerThread);
    parallel_chunks(ceil_div(n, per), [&](int64_t c, int) { f(c * per, std::min(n, (c + 1) * per)); });
  }

  int64_t chunk_rows(int64_t rows, size_t w_row_bytes, int64_t n_tokens) const {
    int64_t c = ceil_div(rows, pool_.size() * kChunksPerThread);
    if (n_tokens > kTokenTile)
      c = std::min<int64_t>(c, static_cast<int64_t>(kWeightChunkBytes / std::max<size_t>(w_row_bytes, 1)));
    return ceil_div(std::max<int64_t>(c, 1), kChunkRowMultiple) * kChunkRowMultiple;
  }

  // w's kernel at this ISA, or null when there is none or w's rows are not whole activation
  // blocks (matmul_fallback then).
  const cpu::MatmulKernel* kernel_for(const WeightView& w) const {
    const cpu::MatmulKernel* k = cpu::select_matmul_kernel(w.type, isa_);
    return k && w.cols % dtype_info(k->act).block_size == 0 ? k : nullptr;
  }

  // The rows a kernel reads: packed weights (prepare_weight) come with a packed gemm; the
  // file's layout otherwise.
  struct WeightRows {
    const uint8_t* base;
    size_t stride;
    bool packed;
  };
  static WeightRows weight_rows(const cpu::MatmulKernel& k, const WeightView& w) {
    const size_t w_rb = row_bytes(w.type, w.cols);
    const bool packed = k.prepare != nullptr && w.packed != nullptr && k.gemm_packed != nullptr;
    return {static_cast<const uint8_t*>(packed ? w.packed : w.data), packed ? cpu::packed_row_bytes(k, w_rb) : w_rb,
            packed};
  }

  // A region's rows: the matrices' one after another, each but the first from the next
  // multiple of the grain (so no piece starts mid-tile): job j's row r is row first_row[j] + r
  // of the region. Returns the region's row count.
  static int64_t region_rows(std::span<const MatmulJob> jobs, std::vector<int64_t>& first_row) {
    first_row.clear();
    int64_t rows = 0;
    for (const MatmulJob& j : jobs) {
      first_row.push_back(ceil_div(rows, kChunkRowMultiple) * kChunkRowMultiple);
      rows = first_row.back() + j.w->rows;
    }
    return rows;
  }

  // The jobs matmuls() will run in one region when the first has a kernel: all of them when
  // they share it (type and width), else the first alone (the others get regions of their own).
  static std::span<const MatmulJob> one_region(std::span<const MatmulJob> jobs) {
    const WeightView& w0 = *jobs[0].w;
    const bool shared = std::all_of(jobs.begin(), jobs.end(), [&](const MatmulJob& j) {
      return j.w->type == w0.type && j.w->cols == w0.cols && j.w->rows > 0;
    });
    return shared ? jobs : jobs.first(1);
  }

  // prefetch_products' job on worker tid: the first rows of the range WorkRanges::reset will
  // give it in the next region, up to kPrefetchProductBytes, while the caller runs the ops
  // before that region alone. Stops when the region (or any other run) starts.
  void prefetch_share(int tid, int n_threads) {
    int64_t r, back;
    WorkRanges::initial_range(prefetch_rows_, kChunkRowMultiple, n_threads, tid, &r, &back);
    size_t budget = kPrefetchProductBytes;
    for (size_t i = 0; i < prefetch_first_row_.size() && r < back && budget > 0; ++i) {
      const int64_t lo = prefetch_first_row_[i], hi = lo + prefetch_parts_[i].rows;
      if (r >= hi) continue;
      r = std::max(r, lo);
      const WeightRows& wr = prefetch_parts_[i].rows_at;
      const uint8_t* p = wr.base + static_cast<size_t>(r - lo) * wr.stride;
      const size_t len = std::min(budget, static_cast<size_t>(std::min(back, hi) - r) * wr.stride);
      for (size_t off = 0; off < len; off += 64) {
        if (off % 4096 == 0 && pool_.cancelled()) return;
        __builtin_prefetch(p + off, 0, 2);  // prefetcht1: into L2 (tile_table.h)
      }
      budget -= len;
      r = hi;
    }
  }

  // jobs: matrices of one type and width (w.cols), each of at least one row.
  void matmul_kernel(const cpu::MatmulKernel& k, std::span<const MatmulJob> jobs, const float* x, int64_t n) {
    const int64_t cols = jobs[0].w->cols;
    const size_t act_rb = row_bytes(k.act, cols);
    if (act_.size() < static_cast<size_t>(n) * act_rb) act_.resize(static_cast<size_t>(n) * act_rb);
    uint8_t* act = act_.data();
    // A kernel with a prepare step gets its activations prepared here, once, rather than
    // in every chunk's gemm call.
    const bool prepare = k.prepare != nullptr;
    const size_t prep_rb = prepare ? k.prepared_row_bytes(cols) : 0;
    uint8_t* prep = prepared_.reserve(static_cast<size_t>(n) * prep_rb);
    auto convert = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        uint8_t* a = act + static_cast<size_t>(t) * act_rb;
        k.convert_act(x + t * cols, a, cols);
        if (prepare) k.prepare(a, cols, prep + static_cast<size_t>(t) * prep_rb);
      }
    };
    // A few tokens, which the caller converts alone, are converted inside the region, after
    // the workers are woken (parallel_ranges' first): their wake-up (0.5-2.5 us on the 2-vCPU
    // Zen 5 VM) overlaps the conversion instead of following it. More, by all threads before it.
    const bool convert_first = pool_.size() > 1 && (n < 2 || n * cols < kParallelMinFloats);
    if (!convert_first) parallel_rows(n, cols, convert);
    const uint8_t* in = prepare ? prep : act;
    const size_t in_rb = prepare ? prep_rb : act_rb;
    const size_t w_rb = row_bytes(jobs[0].w->type, cols);
    const int64_t rows = region_rows(jobs, first_row_);
    // A batch's pieces: at most 128 KiB of weights (at least one grain of rows); a few tokens: no cap.
    const int64_t cap =
        n > kTokenTile ? std::max<int64_t>(1, static_cast<int64_t>(kWeightChunkBytes / std::max<size_t>(w_rb, 1))) : 0;
    auto first = [&] {
      if (convert_first) convert(0, n);
    };
    parallel_ranges(rows, kChunkRowMultiple, cap, n == 1 ? kMinStealRowsOneToken : 0, first, [&](int64_t r0, int64_t r1) {
      for (size_t i = 0; i < jobs.size(); ++i) {
        const WeightView& w = *jobs[i].w;
        const int64_t b = std::max<int64_t>(r0 - first_row_[i], 0), e = std::min(r1 - first_row_[i], w.rows);
        if (b >= e) continue;
        const WeightRows wr = weight_rows(k, w);
        const auto gemm = wr.packed ? k.gemm_packed : prepare ? k.gemm_prepared : k.gemm;
        for (int64_t t0 = 0; t0 < n; t0 += kTokenTile)
          gemm(wr.base, wr.stride, cols, b, e, in + static_cast<size_t>(t0) * in_rb, in_rb,
               std::min(kTokenTile, n - t0), jobs[i].y + t0 * w.rows, w.rows);
      }
    });
  }

  void matmul_fallback(const WeightView& w, const float* x, float* y, int64_t n) {
    const size_t w_rb = row_bytes(w.type, w.cols);
    const auto* base = static_cast<const uint8_t*>(w.data);
    const size_t budget = n <= kFallbackFewTokens ? kFallbackBlockBytesFew : kFallbackBlockBytesMany;
    const int64_t block =
        std::clamp<int64_t>(static_cast<int64_t>(budget / (static_cast<size_t>(w.cols) * sizeof(float))), 4, 64) / 4 * 4;
    const int64_t per = chunk_rows(w.rows, w_rb, n);
    parallel_chunks(ceil_div(w.rows, per), [&](int64_t c, int tid) {
      const int64_t r1 = std::min(w.rows, (c + 1) * per);
      std::vector<float>& scratch = weight_scratch_[static_cast<size_t>(tid)];
      for (int64_t r = c * per; r < r1; r += block) {
        const int64_t nr = std::min(block, r1 - r);
        const float* wp;
        if (w.type == DType::F32) {
          wp = reinterpret_cast<const float*>(base + static_cast<size_t>(r) * w_rb);
        } else {
          scratch.resize(static_cast<size_t>(block * w.cols));
          for (int64_t i = 0; i < nr; ++i)
            ops_->to_f32(w.type, base + static_cast<size_t>(r + i) * w_rb, 0, w.cols, scratch.data() + i * w.cols);
          wp = scratch.data();
        }
        ops_->gemm_f32(wp, w.cols, nr, x, w.cols, n, w.cols, y + r, w.rows);
      }
    });
  }

  Isa isa_;
  const cpu::VecOps* ops_;
  // prefetch_products' plan, read by the workers while its job is posted (declared before the
  // pool, which joins that job when it is destroyed).
  struct PrefetchPart {
    WeightRows rows_at;
    int64_t rows;
  };
  std::vector<PrefetchPart> prefetch_parts_;
  std::vector<int64_t> prefetch_first_row_;
  int64_t prefetch_rows_ = 0;
  const std::function<void(int, int)> prefetch_job_ = [this](int tid, int n) { prefetch_share(tid, n); };
  ThreadPool pool_;
  std::atomic<int64_t> next_chunk_{0};
  WorkRanges ranges_{pool_.size()};  // parallel_ranges' state
  alignas(64) std::atomic<bool> first_done_{false};  // and its first() finished
  std::vector<int64_t> first_row_;   // matmul_kernel: where each matrix's rows start in its region
  std::vector<std::vector<float>> weight_scratch_;            // per thread: dequantized weight rows
  std::vector<cpu::AttentionScratch> attention_scratch_;      // per thread
  std::vector<int64_t> span_first_, span_token_;              // attention_in_spans: spans by token
  std::vector<float> span_parts_;                             // and their parts, when spans are the chunks
  std::vector<uint8_t> act_;                                  // activations in the kernel's format
  cpu::AlignedBytes prepared_;                                // and prepared, for kernels with a prepare step
  bool repack_ = true;                                        // CpuBackendOptions::repack_weights
  bool prefetch_products_ = true;                             // TOKENHIVE_PREFETCH_NEXT=0: off
  cpu::HugePageArena packed_weights_;                         // prepare_weight's copies
  size_t packed_bytes_ = 0;
  cpu::RopeCache rope_cache_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace th
