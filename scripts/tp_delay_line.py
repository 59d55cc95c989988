#!/usr/bin/env python3
"""A network link with a one-way delay and a rate, between two network namespaces, in user
space: what `tc qdisc ... netem delay D rate R` on a veth pair would do, for kernels built
without netem (this machine's: `tc qdisc add ... netem` says "Specified qdisc kind is
unknown"). Each namespace gets a TUN device (ADDR/24, MTU 9000: jumbo frames); every packet
one side sends is held until the link is free (serialized at RATE) and then DELAY more, and
handed to the other side. Run as root; runs until killed. Used by scripts/tp_shaped_link.sh.

  tp_delay_line.py NS_A ADDR_A NS_B ADDR_B DELAY_US RATE_MBIT   (RATE_MBIT 0: unlimited)
"""
import collections
import ctypes
import fcntl
import os
import select
import struct
import subprocess
import sys
import time

TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000
CLONE_NEWNET, PR_SET_TIMERSLACK = 0x40000000, 29
libc = ctypes.CDLL(None, use_errno=True)


def enter(ns):
    with open(f"/run/netns/{ns}") as f:
        if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
            sys.exit(f"tp_delay_line: setns {ns}: {os.strerror(ctypes.get_errno())}")


def tun(ns, addr):
    """A TUN device named tp0 in namespace ns, up, with addr/24; its file descriptor."""
    enter(ns)
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"tp0", IFF_TUN | IFF_NO_PI))
    for cmd in (["ip", "addr", "add", f"{addr}/24", "dev", "tp0"], ["ip", "link", "set", "tp0", "mtu", "9000", "up"]):
        subprocess.run(["ip", "-n", ns] + cmd[1:], check=True)
    os.set_blocking(fd, False)
    return fd


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    ns_a, addr_a, ns_b, addr_b = sys.argv[1:5]
    delay, rate = float(sys.argv[5]) * 1e-6, float(sys.argv[6]) * 1e6 / 8  # seconds, bytes/s
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)  # wake on time (the default slack is 50 us)
    fds = [tun(ns_a, addr_a), tun(ns_b, addr_b)]
    print(f"tp_delay_line: {ns_a} {addr_a} <-> {ns_b} {addr_b}: {delay * 1e6:.0f} us, "
          f"{'unlimited' if rate == 0 else f'{rate * 8 / 1e6:.0f} Mbit/s'}", flush=True)
    queue = [collections.deque(), collections.deque()]  # per direction: (due, packet), due ascending
    free_at = [0.0, 0.0]  # when each direction's wire is free again
    while True:
        now = time.monotonic()
        for d in (0, 1):  # hand over what is due
            while queue[d] and queue[d][0][0] <= now:
                os.write(fds[1 - d], queue[d].popleft()[1])
        due = [q[0][0] for q in queue if q]
        timeout = max(0.0, min(due) - time.monotonic()) if due else None
        ready, _, _ = select.select(fds, [], [], timeout)
        now = time.monotonic()
        for d, fd in enumerate(fds):
            if fd not in ready:
                continue
            while True:
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                start = max(now, free_at[d])
                free_at[d] = start + (len(packet) / rate if rate else 0)
                queue[d].append((free_at[d] + delay, packet))


if __name__ == "__main__":
    main()
