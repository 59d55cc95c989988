#include "base/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace th {
namespace {

// A datagram socket standing in for systemd's, bound at `name` ('@': abstract).
int bind_notify_socket(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  if (name[0] == '@') addr.sun_path[0] = '\0';
  if (name[0] == '/') ::unlink(name.c_str());
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())), 0);
  return fd;
}

std::string receive(int fd) {
  char buf[256];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(SdNotify, SendsTheStateToAPathOrAbstractSocket) {
  for (const std::string& name : {test::temp_path("notify.sock"), "@th-notify-test-" + std::to_string(::getpid())}) {
    const int fd = bind_notify_socket(name);
    ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
    EXPECT_TRUE(sd_notify("READY=1").ok()) << name;
    EXPECT_EQ(receive(fd), "READY=1") << name;
    ::close(fd);
    if (name[0] == '/') ::unlink(name.c_str());
  }
  ::unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotify, NothingWithoutTheVariableAnErrorForABadOne) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(sd_notify("READY=1").ok());
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_NE(sd_notify("READY=1").message().find("NOTIFY_SOCKET"), std::string::npos);
  ::setenv("NOTIFY_SOCKET", test::temp_path("nobody-listens.sock").c_str(), 1);
  EXPECT_FALSE(sd_notify("READY=1").ok());
  ::unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace th
