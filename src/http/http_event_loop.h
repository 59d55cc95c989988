// One event-loop thread of an HttpServer: an epoll set over the shared
// listening socket and this loop's connections, with non-blocking sockets,
// per-connection deadlines and a mailbox through which other threads send
// response bytes. Nothing in here blocks; no thread exists per connection.
//
// A connection reads one request at a time: while its response is pending it
// reads nothing more (pipelined requests wait in the socket), so the bytes
// held per connection are bounded by the parser's limits plus one read.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "http/http_request_parser.h"
#include "http/http_router.h"
#include "http/http_server_counters.h"
#include "http/http_server_options.h"
#include "http/loop_mailbox.h"
#include "http/request_id.h"
#include "http/response_exchange.h"

namespace th::http {

class HttpEventLoop {
 public:
  using Clock = std::chrono::steady_clock;

  HttpEventLoop(const HttpServerOptions& options, const HttpRouter& router, RequestIdGenerator& ids,
                HttpServerCounters& counters);
  ~HttpEventLoop();
  HttpEventLoop(const HttpEventLoop&) = delete;
  HttpEventLoop& operator=(const HttpEventLoop&) = delete;

  /// @brief Creates the epoll set and adds the listening socket (shared with
  /// the other loops: EPOLLEXCLUSIVE wakes one of them per connection).
  Status init(int listen_fd);
  /// @brief The loop; returns after stop().
  void run();

  // From any thread.
  /// @brief Stops accepting, closes idle connections, and has the others
  /// close after their current response. `done` runs on the loop thread once
  /// the listening socket is out of this loop.
  void drain(std::function<void()> done);
  /// @brief Closes every connection (their on_close callbacks fire) and ends run().
  void stop();
  size_t open_connections() const { return open_.load(); }

 private:
  enum class State {
    kReading,    // reading a request (or idle between requests)
    kHandling,   // a request is with its handler; its response may be streaming
    kClosing,    // writing a final response, then lingering
    kLingering,  // write side shut; discarding input until EOF or the deadline
  };
  enum class Deadline { kNone, kIdle, kHeader, kBody, kWrite, kLinger };

  struct Connection {
    uint64_t id = 0;
    UniqueFd fd;
    std::string peer;  // "address:port" of the client
    State state = State::kReading;
    HttpRequestParser parser;
    std::string in;   // read but not parsed yet: a pipelined request's bytes
    std::string out;  // to write
    size_t out_sent = 0;
    std::shared_ptr<ResponseExchange> exchange;
    bool response_done = false;  // the exchange's last byte is in `out`
    bool close_after_response = false;
    bool continue_sent = false;
    bool closed = false;
    Deadline deadline = Deadline::kNone;
    Clock::time_point deadline_at{};
    explicit Connection(const HttpLimits& limits) : parser(limits) {}
  };

  void accept_connections();
  void on_event(Connection& c, uint32_t events);
  void read_requests(Connection& c);
  size_t parse(Connection& c, std::string_view data);
  void dispatch(Connection& c, HttpRequest request);
  void fail_connection(Connection& c, int status, const char* reason);
  void flush(Connection& c);
  void finish_response(Connection& c);
  void begin_linger(Connection& c);
  void discard_input(Connection& c);
  void close(Connection& c);
  void take_mail();
  void on_output(const std::shared_ptr<ResponseExchange>& exchange);
  void expire_deadlines();
  void set_deadline(Connection& c, Deadline kind, Clock::duration after);
  void clear_deadline(Connection& c);
  int wait_timeout_ms() const;
  void set_accepting(bool on);

  const HttpServerOptions& options_;
  const HttpRouter& router_;
  RequestIdGenerator& ids_;
  HttpServerCounters& counters_;

  UniqueFd epoll_;
  int listen_fd_ = -1;
  bool accepting_ = false;
  Clock::time_point accept_resume_at_{};  // after EMFILE: accept again from then
  std::shared_ptr<LoopMailbox> mailbox_;
  bool stopping_ = false;
  bool draining_ = false;
  Clock::time_point now_{};

  uint64_t next_id_ = 16;  // below: the listener and the mailbox
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<Connection>> graveyard_;  // closed this iteration; freed at its end
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  std::atomic<size_t> open_{0};
  std::vector<char> read_buffer_;
  std::vector<std::shared_ptr<ResponseExchange>> mail_exchanges_;
  std::vector<std::function<void()>> mail_tasks_;
};

}  // namespace th::http
