// LlamaModel split across ranks by attention heads (Megatron-style tensor parallelism):
// each rank keeps whole KV heads and the query heads that share them (the rows of
// Q/K/V for those heads, the same columns of the output projection), 1/N of the FFN (rows
// of gate and up, the same columns of down), and all-reduces the two partial sums of a
// layer (after the attention output and after the FFN down projection). Embedding and
// norms are replicated; the output matrix too, but only rank 0 multiplies by it (it alone
// samples), so the other ranks never touch its pages.
//
// Rank 0 runs the engine as in one process; every forward pass it makes is first
// broadcast as a plan (token ids, sequences, positions, each sequence's KV block table, the
// compute type and the KV cache's shape), and the other ranks run the same pass in
// follow(). The tables name every slot a token writes and reads, so a follower's cache
// mirrors rank 0's layout without a KV manager of its own.
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "format/gguf.h"
#include "model/llama_model.h"

namespace th {

namespace {

// Rows [first, first + n): a view into the same bytes (the file's mapping).
WeightView rows_of(const WeightView& w, int64_t first, int64_t n) {
  return WeightView{w.type, n, w.cols,
                    static_cast<const uint8_t*>(w.data) + static_cast<size_t>(first) * row_bytes(w.type, w.cols)};
}

// Whether [p, p + n) lies in a mapping of a file (/proc/self/maps: an inode), where dropping
// pages from this process loses nothing: they are read again from the page cache or the file.
bool file_backed(const void* p, size_t n) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = a + n;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    unsigned long long offset = 0, inode = 0;
    char perms[8] = {}, dev[16] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %llx %15s %llu", &lo, &hi, perms, &offset, dev, &inode) != 6) continue;
    if (a >= lo && a < hi) return inode != 0 && b <= hi;
  }
  return false;
}

// Drops [p, p + n) from this process's resident set after a column slice was copied out of
// it: the whole pages inside the range. MADV_DONTNEED for a file's mapping (the kernel reads
// the pages again if anyone touches them: nobody will); nothing for anonymous memory (a
// decrypted model), where it would zero the weights. Not MADV_PAGEOUT: it skips pages
// another process maps too, and every rank reads part of every row.
void release_pages(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (hi > lo && file_backed(p, n)) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

constexpr int64_t kStep = 1, kStop = 2, kReport = 3;

uint64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (in >> key)
    if (key == "VmRSS:" && in >> kib) return kib * 1024;
  return 0;
}
// The plan's fixed part: kind, compute type, tokens, sequences, table entries, KV blocks,
// KV block size, KV dtype.
constexpr size_t kHeader = 8;

}  // namespace

uint64_t model_fingerprint(const GgufFile& f) {
  // Every tensor's name, shape, type and the first and last 64 bytes of its data, and every
  // metadata key: different files of one shape (mkmodel's seeds) differ in their bytes, and
  // reading 128 bytes a tensor keeps the check from touching the whole model.
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [key, value] : f.metadata()) XXH3_64bits_update(st, key.data(), key.size());
  for (const GgufTensor& t : f.tensors()) {
    XXH3_64bits_update(st, t.name.data(), t.name.size());
    XXH3_64bits_update(st, t.dims.data(), t.dims.size() * sizeof(int64_t));
    XXH3_64bits_update(st, &t.type, sizeof t.type);
    const size_t k = std::min<size_t>(64, t.nbytes);
    XXH3_64bits_update(st, t.data, k);
    XXH3_64bits_update(st, t.data + t.nbytes - k, k);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

WeightView LlamaModel::column_slice(const WeightView& w, int64_t first, int64_t n) {
  const size_t src_row = row_bytes(w.type, w.cols), skip = row_bytes(w.type, first), keep = row_bytes(w.type, n);
  std::vector<uint8_t>& out = shard_storage_.emplace_back(keep * static_cast<size_t>(w.rows));
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(out.data() + static_cast<size_t>(r) * keep, src + static_cast<size_t>(r) * src_row + skip, keep);
  release_pages(w.data, src_row * static_cast<size_t>(w.rows));
  return WeightView{w.type, w.rows, n, out.data()};
}

Status LlamaModel::shard(Communicator& comm) {
  const int N = comm.size(), r = comm.rank();
  const ModelConfig& c = cfg_;
  if (!copies_.empty()) return Status::error("tensor parallelism: shard the model before adding compute types");
  if (N > 1 && c.n_expert > 0)
    return Status::errorf("--tensor-parallel ", N, ": mixture-of-experts models are not split across ranks");
  if (N > c.n_head)
    return Status::errorf("--tensor-parallel ", N, ": the model has ", c.n_head, " attention heads, so at most ",
                          c.n_head, " ranks");
  if (c.n_head_kv % N != 0)
    return Status::errorf("--tensor-parallel ", N, ": the model's ", c.n_head_kv,
                          " KV heads do not divide among ", N, " ranks (each rank holds whole KV heads)");
  if (c.n_ff % N != 0)
    return Status::errorf("--tensor-parallel ", N, ": the FFN width ", c.n_ff, " does not divide among ", N, " ranks");
  comm_ = &comm;
  if (N == 1) return ok_status();
  const int64_t q = c.n_head / N * c.head_dim, kv = c.n_head_kv / N * c.head_dim, ff = c.n_ff / N;
  // A column slice of a quantized matrix must be whole blocks (32 elements for q8_0/q4_0,
  // 256 for the K-quants); refused rather than replicated, so every rank's share stays 1/N.
  auto columns_ok = [&](const WeightView& w, int64_t n, int64_t l, const char* name) -> Status {
    const int64_t block = dtype_info(w.type).block_size;
    if (n % block == 0) return ok_status();
    return Status::errorf("--tensor-parallel ", N, ": blk.", l, ".", name, " is ", dtype_name(w.type),
                          " (blocks of ", block, "), and a rank's ", n, " columns of it are not whole blocks");
  };
  for (size_t l = 0; l < layers_.size(); ++l) {
    TH_RETURN_IF_ERROR(columns_ok(layers_[l].wo, q, static_cast<int64_t>(l), "attn_output.weight"));
    TH_RETURN_IF_ERROR(columns_ok(layers_[l].w_down, ff, static_cast<int64_t>(l), "ffn_down.weight"));
  }
  for (Layer& L : layers_) {
    L.wq = rows_of(L.wq, r * q, q);
    L.wk = rows_of(L.wk, r * kv, kv);
    L.wv = rows_of(L.wv, r * kv, kv);
    if (L.bq) L.bq += r * q;
    if (L.bk) L.bk += r * kv;
    if (L.bv) L.bv += r * kv;
    L.wo = column_slice(L.wo, r * q, q);
    L.w_gate = rows_of(L.w_gate, r * ff, ff);
    L.w_up = rows_of(L.w_up, r * ff, ff);
    L.w_down = column_slice(L.w_down, r * ff, ff);
  }
  cfg_.n_head /= N;
  cfg_.n_head_kv /= N;
  cfg_.n_ff /= N;
  return ok_status();
}

void LlamaModel::reduce(float* y, int64_t n) {
  if (!comm_ || comm_->size() == 1 || !comm_status_.ok()) return;
  // Through host memory: the backend's buffers may be a device's (for the CPU backend these
  // are two copies of n_tokens x n_embd floats, small beside the matmul before them).
  reduce_host_.resize(static_cast<size_t>(n));
  backend_->read(y, reduce_host_.data(), n);
  comm_status_ = comm_->all_reduce_sum(reduce_host_.data(), static_cast<size_t>(n));
  backend_->copy_from_host(reduce_host_.data(), y, static_cast<size_t>(n) * sizeof(float));
}

Status LlamaModel::send_plan(const ForwardBatch& batch, ComputeType type, const KvCache& kv) {
  const int64_t n = static_cast<int64_t>(batch.size()), n_seq = static_cast<int64_t>(batch.tables.size());
  int64_t entries = 0;
  for (const auto& t : batch.tables) entries += static_cast<int64_t>(t.size());
  int64_t header[kHeader] = {kStep, static_cast<int64_t>(type), n, n_seq, entries, kv.n_blocks(), kv.block_size(),
                             static_cast<int64_t>(kv.type())};
  TH_RETURN_IF_ERROR(comm_->broadcast(header, sizeof header, 0));
  std::vector<int32_t> body;
  body.reserve(static_cast<size_t>(3 * n + n_seq + entries));
  body.insert(body.end(), batch.ids.begin(), batch.ids.end());
  body.insert(body.end(), batch.seq.begin(), batch.seq.end());
  body.insert(body.end(), batch.pos.begin(), batch.pos.end());
  for (const auto& t : batch.tables) body.push_back(static_cast<int32_t>(t.size()));
  for (const auto& t : batch.tables) body.insert(body.end(), t.begin(), t.end());
  return comm_->broadcast(body.data(), body.size() * sizeof(int32_t), 0);
}

Status LlamaModel::stop_followers() {
  if (!comm_ || comm_->size() == 1 || comm_->rank() != 0) return ok_status();
  int64_t header[kHeader] = {kStop, 0, 0, 0, 0, 0, 0, 0};
  return comm_->broadcast(header, sizeof header, 0);
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> LlamaModel::rank_memory() {
  const uint64_t mine[2] = {weight_bytes(ComputeType::Native), resident_bytes()};
  const int n = comm_ ? comm_->size() : 1;
  std::vector<uint64_t> all(2 * static_cast<size_t>(n));
  if (n == 1) {
    all.assign(mine, mine + 2);
  } else {
    if (comm_->rank() == 0) {
      int64_t header[kHeader] = {kReport, 0, 0, 0, 0, 0, 0, 0};
      TH_RETURN_IF_ERROR(comm_->broadcast(header, sizeof header, 0));
    }
    TH_RETURN_IF_ERROR(comm_->all_gather(mine, sizeof mine, all.data()));
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(all[2 * static_cast<size_t>(r)], all[2 * static_cast<size_t>(r) + 1]);
  return out;
}

Status LlamaModel::follow() {
  if (!comm_ || comm_->rank() == 0) return Status::error("follow: only ranks other than 0 follow rank 0's plans");
  std::unique_ptr<KvCache> kv;
  ForwardBatch batch;
  std::vector<int32_t> body, table_flat;
  std::vector<float> logits;
  for (;;) {
    int64_t h[kHeader] = {};
    TH_RETURN_IF_ERROR(comm_->broadcast(h, sizeof h, 0, /*idle=*/true));
    if (h[0] == kStop) return ok_status();
    if (h[0] == kReport) {
      TH_RETURN_IF_ERROR(rank_memory().status());
      continue;
    }
    const int64_t n = h[2], n_seq = h[3], entries = h[4];
    if (h[0] != kStep || n < 0 || n_seq < 0 || entries < 0 || n > (int64_t{1} << 24) || n_seq > n || entries > (int64_t{1} << 28))
      return Status::errorf("follow: rank 0 sent a malformed plan (kind ", h[0], ", ", n, " tokens)");
    body.resize(static_cast<size_t>(3 * n + n_seq + entries));
    TH_RETURN_IF_ERROR(comm_->broadcast(body.data(), body.size() * sizeof(int32_t), 0));
    if (!kv || kv->n_blocks() != h[5] || kv->block_size() != h[6] || static_cast<int64_t>(kv->type()) != h[7]) {
      kv.reset();
      TH_ASSIGN_OR_RETURN(KvCache made, KvCache::create(*backend_, cfg_.n_layer, cfg_.kv_dim(), h[5], h[6],
                                                        static_cast<DType>(h[7])));
      kv = std::make_unique<KvCache>(std::move(made));
    }
    const int32_t* p = body.data();
    batch.ids.assign(p, p + n);
    batch.seq.assign(p + n, p + 2 * n);
    batch.pos.assign(p + 2 * n, p + 3 * n);
    batch.want_logits.assign(static_cast<size_t>(n), 0);  // rank 0 alone multiplies by the output matrix
    batch.tables.clear();
    const int32_t* lens = p + 3 * n;
    const int32_t* entry = lens + n_seq;
    int64_t used = 0;
    for (int64_t s = 0; s < n_seq; ++s) {
      if (lens[s] < 0 || used + lens[s] > entries) return Status::error("follow: rank 0 sent malformed block tables");
      batch.tables.emplace_back(entry + used, static_cast<size_t>(lens[s]));
      used += lens[s];
    }
    TH_RETURN_IF_ERROR(forward(batch, *kv, &logits, static_cast<ComputeType>(h[1])));
  }
}

}  // namespace th
