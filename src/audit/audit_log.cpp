#include "audit/audit_log.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "audit/audit_verify.h"

namespace th::audit {
namespace {

std::string errno_text() { return std::strerror(errno); }

Result<UniqueFd> open_locked(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640));
  if (!fd) return Status::errorf(path, ": cannot open: ", errno_text());
  // Two writers would interleave records and fork the tree.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    return Status::errorf(path, ": in use by another process (", errno_text(), ")");
  return fd;
}

Result<std::vector<uint8_t>> read_all(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::errorf(path, ": cannot stat: ", errno_text());
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::errorf(path, ": cannot read: ", errno_text());
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  bytes.resize(done);
  return bytes;
}

Status pwrite_all(int fd, std::span<const uint8_t> b, uint64_t offset) {
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t w = ::pwrite(fd, b.data() + done, b.size() - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::errorf("write failed: ", w < 0 ? errno_text() : "no progress");
    done += static_cast<size_t>(w);
  }
  return ok_status();
}

void sync_parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  UniqueFd d(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) ::fsync(d.get());  // best effort: the file's own data is synced regardless
}

std::vector<uint8_t> new_file_bytes(const AuditHeader& h) {
  std::vector<uint8_t> b(kAuditMagic.begin(), kAuditMagic.end());
  const std::vector<uint8_t> rec = frame_record(AuditRecordType::kHeader, encode_header(h));
  b.insert(b.end(), rec.begin(), rec.end());
  return b;
}

// Writes a fresh file (magic and header) over whatever torn start it had.
Status start_file(int fd, const std::string& path, const AuditHeader& h, uint64_t& size) {
  const std::vector<uint8_t> b = new_file_bytes(h);
  if (::ftruncate(fd, 0) != 0) return Status::errorf(path, ": cannot truncate: ", errno_text());
  Status s = pwrite_all(fd, b, 0);
  if (!s.ok()) return Status::errorf(path, ": ", s.message());
  if (::fdatasync(fd) != 0) return Status::errorf(path, ": cannot sync: ", errno_text());
  sync_parent_dir(path);
  size = b.size();
  return ok_status();
}

Status drop_tail(int fd, const std::string& path, uint64_t good_size) {
  if (::ftruncate(fd, static_cast<off_t>(good_size)) != 0 || ::fdatasync(fd) != 0)
    return Status::errorf(path, ": cannot drop the torn last record: ", errno_text());
  return ok_status();
}

std::optional<AuditCheckpoint> last_checkpoint(const AuditFileScan& scan) {
  for (auto it = scan.records.rbegin(); it != scan.records.rend(); ++it)
    if (it->type == AuditRecordType::kCheckpoint)
      if (Result<AuditCheckpoint> c = decode_checkpoint(it->payload); c.ok()) return *c;
  return std::nullopt;
}

}  // namespace

AuditLog::AuditLog(std::string path, Ed25519PrivateKey key, AuditLogOptions options)
    : path_(std::move(path)), key_(std::move(key)), options_(std::move(options)) {}

AuditLog::~AuditLog() { (void)close(); }

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::string& path, Ed25519PrivateKey key,
                                                 AuditLogOptions options) {
  std::unique_ptr<AuditLog> log(new AuditLog(path, std::move(key), std::move(options)));
  const std::string& copy_path = log->options_.checkpoint_copy_path;

  // The copy first: it says how far the log has been seen to reach.
  std::vector<uint8_t> copy_bytes;
  AuditFileScan copy_scan;
  if (!copy_path.empty()) {
    TH_ASSIGN_OR_RETURN(log->copy_fd_, open_locked(copy_path));
    TH_ASSIGN_OR_RETURN(copy_bytes, read_all(log->copy_fd_.get(), copy_path));
    copy_scan = scan_audit_file(copy_bytes);
    if (copy_scan.corrupt)
      return Status::errorf(copy_path, ": byte ", copy_scan.corrupt->offset, ": ", copy_scan.corrupt->reason);
  }

  TH_ASSIGN_OR_RETURN(log->fd_, open_locked(path));
  TH_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_all(log->fd_.get(), path));
  const AuditFileScan scan = scan_audit_file(bytes);
  AuditOpenReport& report = log->report_;
  const Ed25519PublicKey& pub = log->key_.public_key();

  if (!scan.header) {
    if (scan.corrupt) return Status::errorf(path, ": byte ", scan.corrupt->offset, ": ", scan.corrupt->reason);
    if (copy_scan.header)
      return Status::errorf(path, ": the log is empty but its checkpoint copy ", copy_path,
                            " holds checkpoints of it: the log was removed or rolled back (move the copy aside to "
                            "start a new log)");
    AuditHeader h;
    if (RAND_bytes(h.log_id.data(), static_cast<int>(h.log_id.size())) != 1)
      return Status::error("cannot draw a random log id");
    h.public_key = pub.raw();
    h.created_unix_us = to_unix_us(std::chrono::system_clock::now());
    h.role = AuditFileRole::kLog;
    if (scan.torn) {
      report.dropped_tail = scan.torn;
      report.dropped_bytes = bytes.size();
    }
    TH_RETURN_IF_ERROR(start_file(log->fd_.get(), path, h, log->file_size_));
    log->header_ = h;
    report.created = true;
  } else {
    AuditVerifyOptions vo;
    vo.allow_torn_tail = true;
    if (copy_scan.header) vo.external = &copy_scan;
    AuditVerifyReport v = verify_audit_log(scan, pub, vo);
    if (!v.ok) {
      std::string where = v.first_bad_index ? cat(" (first bad entry: ", *v.first_bad_index, ")") : "";
      return Status::errorf(path, ": does not verify, refusing to extend it: ", v.reason, where);
    }
    if (scan.torn) {
      TH_RETURN_IF_ERROR(drop_tail(log->fd_.get(), path, scan.good_size));
      report.dropped_tail = scan.torn;
      report.dropped_bytes = bytes.size() - scan.good_size;
    }
    log->header_ = *scan.header;
    log->file_size_ = scan.good_size;
    log->frontier_ = v.tree.frontier();
    if (v.tree.size() > 0) log->last_leaf_ = v.tree.leaf(v.tree.size() - 1);
    if (v.last_checkpoint) {
      log->checkpointed_ = v.last_checkpoint->tree_size;
      log->have_checkpoint_ = true;
    }
    report.entries = v.entries;
    report.checkpoints = v.checkpoints;
  }

  if (log->copy_fd_) {
    if (!copy_scan.header) {
      AuditHeader h = log->header_;
      h.role = AuditFileRole::kCheckpointCopy;
      if (copy_scan.torn) report.dropped_copy_tail = copy_scan.torn;
      TH_RETURN_IF_ERROR(start_file(log->copy_fd_.get(), copy_path, h, log->copy_size_));
    } else {
      log->copy_size_ = copy_scan.good_size;
      if (copy_scan.torn) {
        TH_RETURN_IF_ERROR(drop_tail(log->copy_fd_.get(), copy_path, copy_scan.good_size));
        report.dropped_copy_tail = copy_scan.torn;
      }
    }
    // A crash between syncing the log's checkpoint and copying it: copy it now.
    const std::optional<AuditCheckpoint> in_log = last_checkpoint(scan);
    const std::optional<AuditCheckpoint> in_copy = last_checkpoint(copy_scan);
    if (in_log && (!in_copy || in_copy->tree_size < in_log->tree_size)) {
      const std::vector<uint8_t> rec = frame_record(AuditRecordType::kCheckpoint, encode_checkpoint(*in_log));
      Status s = pwrite_all(log->copy_fd_.get(), rec, log->copy_size_);
      if (!s.ok() || ::fdatasync(log->copy_fd_.get()) != 0)
        return Status::errorf(copy_path, ": cannot append the last checkpoint: ", s.ok() ? errno_text() : s.message());
      log->copy_size_ += rec.size();
    }
  }

  log->last_checkpoint_time_ = std::chrono::steady_clock::now();
  log->opened_ = true;
  if (log->options_.checkpoint_every_entries > 0 || log->options_.checkpoint_every_seconds > 0)
    log->timer_ = std::thread([l = log.get()] { l->timer_loop(); });
  return log;
}

Status AuditLog::write_at_end(std::span<const uint8_t> bytes) {
  Status s = pwrite_all(fd_.get(), bytes, file_size_);
  if (!s.ok()) {
    // A partial record left in place would be a corrupt record once the next
    // one follows it: cut it off, or stop writing.
    if (::ftruncate(fd_.get(), static_cast<off_t>(file_size_)) != 0)
      broken_ = cat(path_, ": ", s.message(), ", and cannot cut the partial record off: ", errno_text());
    return Status::errorf(path_, ": ", s.message());
  }
  file_size_ += bytes.size();
  return ok_status();
}

Result<uint64_t> AuditLog::append(const AuditEntry& entry) {
  TH_RETURN_IF_ERROR(check_entry_fits(entry));
  bool wake = false;
  uint64_t index = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return Status::errorf(path_, ": the audit log is closed");
    if (!broken_.empty()) return Status::error(broken_);
    index = frontier_.size();
    const std::vector<uint8_t> payload = encode_entry(LoggedEntry{index, last_leaf_, entry});
    TH_RETURN_IF_ERROR(write_at_end(frame_record(AuditRecordType::kEntry, payload)));
    last_leaf_ = merkle_leaf_hash(payload);
    frontier_.append(last_leaf_);
    const uint64_t every = options_.checkpoint_every_entries;
    wake = every > 0 && frontier_.size() - checkpointed_ >= every;
  }
  if (wake) wake_.notify_one();
  return index;
}

Status AuditLog::checkpoint() {
  std::lock_guard<std::mutex> order(checkpoint_mu_);
  std::vector<uint8_t> rec;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!broken_.empty()) return Status::error(broken_);
    if (!fd_) return Status::errorf(path_, ": the audit log is closed");
    const uint64_t n = frontier_.size();
    if (have_checkpoint_ && n == checkpointed_) return ok_status();
    AuditCheckpoint c;
    c.tree_size = n;
    c.root = frontier_.root();
    c.time_unix_us = to_unix_us(std::chrono::system_clock::now());
    c.signature = key_.sign(checkpoint_signed_bytes(header_.log_id, c));
    rec = frame_record(AuditRecordType::kCheckpoint, encode_checkpoint(c));
    TH_RETURN_IF_ERROR(write_at_end(rec));
    checkpointed_ = n;
    have_checkpoint_ = true;
    last_checkpoint_time_ = std::chrono::steady_clock::now();
  }
  // Synced outside mu_: appends go on meanwhile (the sync covers them too).
  if (::fdatasync(fd_.get()) != 0) {
    std::lock_guard<std::mutex> lk(mu_);
    broken_ = cat(path_, ": cannot sync: ", errno_text());
    return Status::error(broken_);
  }
  if (copy_fd_) {
    Status s = pwrite_all(copy_fd_.get(), rec, copy_size_);
    if (s.ok() && ::fdatasync(copy_fd_.get()) != 0) s = Status::errorf("cannot sync: ", errno_text());
    if (!s.ok()) {
      // A log whose copy stopped is no longer held to anything outside: say so on every append.
      std::lock_guard<std::mutex> lk(mu_);
      broken_ = cat(options_.checkpoint_copy_path, ": ", s.message());
      if (::ftruncate(copy_fd_.get(), static_cast<off_t>(copy_size_)) != 0) broken_ += " (partial record left)";
      return Status::error(broken_);
    }
    copy_size_ += rec.size();
  }
  return ok_status();
}

void AuditLog::timer_loop() {
  const uint64_t every = options_.checkpoint_every_entries;
  const double seconds = options_.checkpoint_every_seconds;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    auto count_due = [&] { return every > 0 && frontier_.size() - checkpointed_ >= every; };
    auto pred = [&] { return stop_ || count_due(); };
    if (seconds > 0)
      wake_.wait_for(lk, std::chrono::duration<double>(seconds), pred);
    else
      wake_.wait(lk, pred);
    if (stop_) break;
    const bool fresh = frontier_.size() > checkpointed_ || !have_checkpoint_;
    const bool time_due = seconds > 0 && std::chrono::steady_clock::now() - last_checkpoint_time_ >=
                                             std::chrono::duration<double>(seconds);
    if (fresh && (count_due() || time_due)) {
      lk.unlock();
      (void)checkpoint();  // a failure sticks (broken_): every append reports it
      lk.lock();
    }
  }
}

Status AuditLog::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A log that failed to open (tampered, rolled back) must not get a checkpoint on the way out.
    if (closed_ || !opened_) return ok_status();
    stop_ = true;
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
  Status s = checkpoint();
  std::lock_guard<std::mutex> order(checkpoint_mu_);
  std::lock_guard<std::mutex> lk(mu_);
  closed_ = true;
  fd_.reset();
  copy_fd_.reset();
  return s;
}

uint64_t AuditLog::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return frontier_.size();
}

uint64_t AuditLog::checkpointed_size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return checkpointed_;
}

}  // namespace th::audit
