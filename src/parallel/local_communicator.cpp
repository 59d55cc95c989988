// The single-process communicator (make_local_communicator) and the start-up agreement
// (agree) every communicator shares.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "parallel/communicator.h"

namespace th {

namespace {

class LocalCommunicator final : public Communicator {
 public:
  std::string_view name() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status all_reduce_sum(float*, size_t) override { return ok_status(); }
  Status all_gather(const void* send, size_t bytes, void* recv) override {
    if (bytes > 0) std::memcpy(recv, send, bytes);
    return ok_status();
  }
  Status broadcast(void*, size_t, int root, bool) override {
    if (root != 0) return Status::errorf("broadcast: root ", root, " is not a rank of 1");
    return ok_status();
  }
  Status barrier(std::chrono::milliseconds) override { return ok_status(); }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  bool failed() const override { return false; }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

Status agree(Communicator& comm, const Status& mine, std::chrono::milliseconds timeout) {
  if (comm.size() == 1) return mine;
  TH_RETURN_IF_ERROR(comm.barrier(timeout));
  // A fixed-size record per rank: one flag byte, then the message (NUL-padded).
  constexpr size_t kMessage = 480;
  std::vector<char> send(1 + kMessage, 0), all(send.size() * static_cast<size_t>(comm.size()), 0);
  send[0] = mine.ok() ? 1 : 0;
  if (!mine.ok()) std::memcpy(send.data() + 1, mine.message().data(), std::min(kMessage - 1, mine.message().size()));
  TH_RETURN_IF_ERROR(comm.all_gather(send.data(), send.size(), all.data()));
  for (int r = 0; r < comm.size(); ++r) {
    const char* rec = all.data() + static_cast<size_t>(r) * send.size();
    if (rec[0] != 1) return Status::errorf("rank ", r, ": ", std::string(rec + 1, strnlen(rec + 1, kMessage)));
  }
  return ok_status();
}

}  // namespace th
