// Host client of the live protocol (client.hpp, docs/live.md).
#include "live/client.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "live/live.hpp"
#include "profile/reader.hpp"

namespace sprofil::live {
namespace {

constexpr uint64_t kMaxImage = uint64_t{4} << 30;  // a sanity bound on what we accept

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

bool wait_fd(int fd, short ev, uint64_t deadline) {
  for (;;) {
    const uint64_t now = now_ms();
    if (now >= deadline) return false;
    pollfd p{fd, ev, 0};
    const int r = poll(&p, 1, static_cast<int>(deadline - now));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

bool io(int fd, void* buf, size_t n, bool out, uint64_t deadline, std::string* error) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r =
        out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return *error = "the process closed the connection", false;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, out ? POLLOUT : POLLIN, deadline))
      continue;
    *error = errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno);
    return false;
  }
  return true;
}

int connect_to(const std::string& path, std::string* error) {
  sockaddr_un a{};
  if (path.size() >= sizeof a.sun_path) return *error = "socket path too long: " + path, -1;
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return *error = std::strerror(errno), -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    *error = path + ": " +
             (e == ECONNREFUSED ? std::string("no process listens (it has exited?)")
                                : std::string(std::strerror(e)));
    return -1;
  }
  return fd;
}

}  // namespace

bool socket_of(const std::string& s, std::string* socket, std::string* error) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    char dir[256];
    if (!user_dir(dir, sizeof dir)) {
      *error = std::string("the per-user directory: ") + std::strerror(errno);
      return false;
    }
    *socket = std::string(dir) + "/" + s + ".sock";
    if (access(socket->c_str(), F_OK) != 0) {
      *error = "process " + s + " serves no live profile (no " + *socket +
               "; is it profiled with osProfileInit, sprofil_live_serve or `sprofil record "
               "--live`, and run by this user?)";
      return false;
    }
    return true;
  }
  *socket = s;
  return true;
}

bool fetch_image(const std::string& socket, std::vector<uint8_t>* image, std::string* error,
                 int timeout_ms) {
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout_ms);
  const int fd = connect_to(socket, error);
  if (fd < 0) return false;
  Message req{};
  std::memcpy(req.magic, kRequestMagic, 4);
  req.version = kVersion;
  req.op_or_status = kOpSnapshot;
  Message ans{};
  // A refusal is answered before the request is read: read the answer even if sending failed.
  std::string send_error;
  const bool sent = io(fd, &req, sizeof req, true, deadline, &send_error);
  bool ok = io(fd, &ans, sizeof ans, false, deadline, error);
  if (!ok && !sent) *error = send_error;
  if (ok && std::memcmp(ans.magic, kAnswerMagic, 4) != 0) {
    *error = "not a sprofil live answer";
    ok = false;
  }
  if (ok && ans.length > kMaxImage) {
    *error = "answer too large (" + std::to_string(ans.length) + " bytes)";
    ok = false;
  }
  if (ok) {
    image->assign(ans.length, 0);
    ok = io(fd, image->data(), image->size(), false, deadline, error);
  }
  ::close(fd);
  if (ok && ans.op_or_status != kOk) {
    *error = std::string(image->begin(), image->end());
    if (error->empty()) *error = "error status " + std::to_string(ans.op_or_status);
    ok = false;
  }
  return ok;
}

bool fetch_profile(const std::string& socket, profile::Profile* out, std::string* error,
                   int timeout_ms) {
  std::vector<uint8_t> image;
  if (!fetch_image(socket, &image, error, timeout_ms)) return false;
  if (!profile::parse_profile(image.data(), image.size(), out, error)) return false;
  // `sprofil record --live` answers with a packed run profile of the one process (only the
  // pages that hold counts): the process's own profile, as an agent's answer is.
  if (out->run && out->processes.size() == 1) *out = profile::process_image(*out, 0);
  profile::resolve_paths(out);  // an agent's names, as record's (profile.hpp)
  return true;
}

std::vector<Target> list_targets(std::string* error) {
  std::vector<Target> out;
  char dir[256];
  if (!user_dir(dir, sizeof dir)) {
    *error = std::string("the per-user directory: ") + std::strerror(errno);
    return out;
  }
  DIR* d = opendir(dir);
  if (!d) {
    *error = std::string(dir) + ": " + std::strerror(errno);
    return out;
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) continue;
    const std::string num = name.substr(0, name.size() - 5);
    if (num.find_first_not_of("0123456789") != std::string::npos) continue;
    Target t;
    t.pid = std::stoi(num);
    t.socket = std::string(dir) + "/" + name;
    std::string ignored;
    const int fd = connect_to(t.socket, &ignored);
    if (fd < 0) continue;  // stale: the process is gone (or exec'd without the service)
    ::close(fd);
    const int cfd = ::open(("/proc/" + num + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (cfd >= 0) {
      char buf[512];
      const ssize_t n = read(cfd, buf, sizeof buf);
      ::close(cfd);
      for (ssize_t i = 0; i < n; ++i) t.command += buf[i] ? buf[i] : ' ';
      while (!t.command.empty() && t.command.back() == ' ') t.command.pop_back();
    }
    out.push_back(t);
  }
  closedir(d);
  return out;
}

PushServer::~PushServer() {
  close();
}

bool PushServer::open(const std::string& socket, std::string* error) {
  sockaddr_un a{};
  if (socket.size() >= sizeof a.sun_path) return *error = "socket path too long: " + socket, false;
  std::string ignored;
  if (const int c = connect_to(socket, &ignored); c >= 0) {
    ::close(c);
    *error = socket + ": another server is running there";
    return false;
  }
  unlink(socket.c_str());  // stale
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return *error = std::strerror(errno), false;
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, socket.c_str(), socket.size() + 1);
  const mode_t old = umask(077);
  const bool ok = bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd_, 64) == 0;
  umask(old);
  if (!ok) {
    *error = socket + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  path_ = socket;
  return true;
}

int PushServer::receive(std::vector<uint8_t>* image, int* peer_pid, std::string* error,
                        int timeout_ms) {
  error->clear();
  if (!wait_fd(fd_, POLLIN, now_ms() + static_cast<uint64_t>(timeout_ms))) return 0;
  const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c < 0) return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ? 0 : -1;
  ucred cred{};
  socklen_t len = sizeof cred;
  int rc = 0;
  Message m{};
  const uint64_t deadline = now_ms() + 10000;
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
      (cred.uid != geteuid() && cred.uid != 0)) {
    *error = "refused a push from another user (uid " + std::to_string(cred.uid) + ")";
  } else if (io(c, &m, sizeof m, false, deadline, error)) {
    if (std::memcmp(m.magic, kRequestMagic, 4) != 0 || m.version != kVersion ||
        m.op_or_status != kOpPush || m.length > kMaxImage) {
      *error = "bad push request";
    } else {
      image->assign(m.length, 0);
      if (io(c, image->data(), image->size(), false, deadline, error)) {
        *peer_pid = cred.pid;
        rc = 1;
      }
    }
  }
  ::close(c);
  return rc;
}

void PushServer::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    unlink(path_.c_str());
  }
  fd_ = -1;
}

}  // namespace sprofil::live
