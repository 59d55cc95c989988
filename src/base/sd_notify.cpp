#include "base/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace th {

Status sd_notify(std::string_view state) {
  const char* name = std::getenv("NOTIFY_SOCKET");
  if (!name || !*name) return ok_status();
  const size_t len = std::strlen(name);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((name[0] != '/' && name[0] != '@') || len >= sizeof(addr.sun_path))
    return Status::error("NOTIFY_SOCKET: " + std::string(name) + " is not an absolute path or @abstract name");
  std::memcpy(addr.sun_path, name, len);
  if (name[0] == '@') addr.sun_path[0] = '\0';  // abstract: the name is the bytes after a NUL
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::error("NOTIFY_SOCKET: socket: " + std::string(std::strerror(errno)));
  const socklen_t size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr), size);
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(state.size()))
    return Status::error("NOTIFY_SOCKET " + std::string(name) + ": " + std::strerror(err));
  return ok_status();
}

}  // namespace th
