// Maps (method, path) to a handler: exact paths, and prefixes written as
// "/v1/models/*". A path with no route is 404; a path routed for other
// methods is 405 with those methods in Allow.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_request.h"
#include "http/response_writer.h"

namespace th::http {

/// A request's handler. It runs on an event-loop thread and must not block:
/// it answers at once, or keeps the ResponseWriter (a cheap, thread-safe
/// handle) and answers later from any thread. `request` is valid only during
/// the call; copy what is needed later.
using HttpHandler = std::function<void(const HttpRequest& request, ResponseWriter writer)>;

class HttpRouter {
 public:
  /// @brief Routes `method` on `path`; a path ending in "/*" matches every
  /// path under that prefix (the longest prefix wins; exact paths first).
  void add(std::string method, std::string path, HttpHandler handler);

  struct Match {
    const HttpHandler* handler = nullptr;  // null: answer `status`
    int status = 200;                      // 404 or 405 when there is no handler
    std::string allow;                     // for 405: "GET, POST"
  };
  Match find(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string method;
    std::string path;  // without the trailing '*' of a prefix route
    bool prefix = false;
    HttpHandler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace th::http
