// One message with file descriptors over a Unix socket (SCM_RIGHTS): both sides of the drain
// protocol (clock/drain_client.cpp in the agent, record/drain.cpp in the record parent).
// Header-only, libc only.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sprofil::util {

constexpr int kMaxPassedFds = 4;

// Sends buf[0, len) with fds[0, nfds) (nfds <= kMaxPassedFds), never raising SIGPIPE, again
// after EINTR. The bytes sent, or -1 with errno set.
inline ssize_t send_with_fds(int s, const void* buf, size_t len, const int* fds, int nfds) {
  if (nfds < 0 || nfds > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char ctl[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  memset(ctl, 0, sizeof ctl);
  msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (nfds > 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = CMSG_SPACE(static_cast<size_t>(nfds) * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(static_cast<size_t>(nfds) * sizeof(int));
    memcpy(CMSG_DATA(c), fds, static_cast<size_t>(nfds) * sizeof(int));
  }
  ssize_t n;
  while ((n = sendmsg(s, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n;
}

// Receives one message into buf[0, len), again after EINTR, and the fds that came with it
// (close-on-exec): the first max_fds (<= kMaxPassedFds) into fds, their number in *nfds; any
// others are closed. The bytes received, or -1 with errno set.
inline ssize_t recv_with_fds(int s, void* buf, size_t len, int* fds, int max_fds, int* nfds) {
  *nfds = 0;
  iovec iov{buf, len};
  alignas(cmsghdr) char ctl[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  ssize_t n;
  while ((n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  for (cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&mh) : nullptr; c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*nfds < max_fds)
        fds[(*nfds)++] = fd;
      else
        close(fd);
    }
  }
  return n;
}

}  // namespace sprofil::util
