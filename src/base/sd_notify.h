// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram of
// "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET, which systemd sets for
// a Type=notify service (deploy/systemd/). Without the variable nothing is sent.
#pragma once

#include <string_view>

#include "base/status.h"

namespace th {

/// @brief Sends `state` (e.g. "READY=1", "STOPPING=1") to $NOTIFY_SOCKET: a filesystem path,
/// or an abstract socket when it starts with '@'. OK and nothing sent when it is unset; an
/// error naming the socket when it is set but cannot be written.
Status sd_notify(std::string_view state);

}  // namespace th
