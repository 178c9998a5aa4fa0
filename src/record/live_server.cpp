// `sprofil record --live` sampling from outside: see live_server.hpp.
#include "record/live_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "live/live.hpp"
#include "profile/writer.hpp"

namespace sprofil::record {

namespace {

constexpr int kSyncMs = 50;            // how often the sockets follow the processes
constexpr int kSnapshotWaitMs = 2000;  // for the rings' thread to make an image

// The live source of one process: its image as record keeps it, as a packed run profile of
// that one process (the one writer), in a malloc'd buffer the service sends and frees
// (live::image_free); the client takes it for the process's own (live::fetch_profile). Packed,
// only the pages of counters that hold a count are sent: a v1 image is dense, cc1plus's
// text with a counter per byte and a system array beside it, 97 MB a snapshot where 7 MB of
// it held counts.
bool snapshot(void* ctx, live::Image* out) {
  const auto* ask = static_cast<const LiveServer::Ask*>(ctx);
  Agentless::Image im;
  if (!ask->source->live_image(ask->pid, &im, kSnapshotWaitMs)) return false;
  // The narrowest counters that hold each region's counts (4-byte counters made a dense
  // snapshot of cc1plus 190 MB).
  for (profile::Region& r : im.profile.regions)
    r.counter_width = profile::counter_width_for(r.max_count());
  const int fd = memfd_create("sprofil-live", MFD_CLOEXEC);
  if (fd < 0) return false;
  bool ok = profile::write_profile_fd(profile::combine_processes({std::move(im.profile)}, {}), fd,
                                      nullptr);
  struct stat st;
  ok = ok && fstat(fd, &st) == 0 && st.st_size > 0;
  uint8_t* data = ok ? static_cast<uint8_t*>(malloc(static_cast<size_t>(st.st_size))) : nullptr;
  size_t got = 0;
  while (data && got < static_cast<size_t>(st.st_size)) {
    const ssize_t n =
        pread(fd, data + got, static_cast<size_t>(st.st_size) - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (!data || got != static_cast<size_t>(st.st_size)) {
    free(data);
    return false;
  }
  out->data = data;
  out->size = out->used = got;
  return true;
}

}  // namespace

bool LiveServer::start(std::string* why) {
  char dir[sizeof(sockaddr_un::sun_path)];
  if (!live::user_dir(dir, sizeof dir)) {
    *why = std::string("the per-user directory of live profiles: ") + strerror(errno);
    return false;
  }
  dir_ = dir;
  source_->serve_live();
  thread_ = std::thread([this] { run(); });
  return true;
}

void LiveServer::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  thread_.join();
  while (!listening_.empty()) close_socket(listening_.begin()->first);
}

// Binds <dir>/<pid>.sock, mode 0600 (the directory is the user's alone, 0700). A socket there
// that answers is another service's (the program serves itself: it keeps it); one that does
// not is stale and replaced.
bool LiveServer::open_socket(pid_t pid) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string path = dir_ + "/" + std::to_string(pid) + ".sock";
  if (path.size() >= sizeof a.sun_path) return false;
  memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    close(fd);
    return false;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
  close(fd);
  const int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l < 0) return false;
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || chmod(path.c_str(), 0600) != 0 ||
      listen(l, 128) != 0) {
    close(l);
    return false;
  }
  listening_[pid] = l;
  return true;
}

void LiveServer::close_socket(pid_t pid) {
  const auto it = listening_.find(pid);
  if (it == listening_.end()) return;
  close(it->second);
  unlink((dir_ + "/" + std::to_string(pid) + ".sock").c_str());
  listening_.erase(it);
}

void LiveServer::sync() {
  const std::vector<pid_t> now = source_->live_pids();
  for (auto it = listening_.begin(); it != listening_.end();) {
    const pid_t pid = (it++)->first;
    bool running = false;
    for (const pid_t p : now) running |= p == pid;
    if (!running) close_socket(pid);
  }
  for (const pid_t p : now)
    if (!listening_.count(p) && !refused_.count(p) && !open_socket(p)) refused_.insert(p);
}

void LiveServer::run() {
  while (!stopping_.load(std::memory_order_acquire)) {
    sync();
    std::vector<pollfd> fds;
    std::vector<pid_t> pids;
    for (const auto& [pid, fd] : listening_) {
      fds.push_back(pollfd{fd, POLLIN, 0});
      pids.push_back(pid);
    }
    if (poll(fds.data(), fds.size(), kSyncMs) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      const int c = accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Ask ask{source_, pids[i]};
      live::serve_connection(c, snapshot, &ask);
      close(c);
    }
  }
}

}  // namespace sprofil::record
