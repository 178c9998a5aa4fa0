// Running real programs from tests: a scratch directory, spawning with captured stdout and
// stderr (memfds), bounded waiting, and the clock. Shared by the agent, live and serve tests.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sprofil::testproc {

using Args = std::vector<std::string>;
using Env = std::vector<std::pair<std::string, std::string>>;  // value "\x01" = unset

inline double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A scratch directory under the test's temp dir, removed at the end (kept when
// SPROFIL_KEEP_TEMP is set).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sprofil") {
    std::string tmpl = ::testing::TempDir() + "/" + prefix + "_XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    if (!path_.empty() && !getenv("SPROFIL_KEEP_TEMP")) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// All of fd from offset 0 (a memfd the child wrote).
inline std::string read_fd(int fd) {
  std::string s;
  char buf[4096];
  off_t off = 0;
  ssize_t n;
  while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
    s.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return s;
}

struct Proc {
  pid_t pid = -1;
  int out = -1, err = -1;  // memfds holding stdout and stderr
  int status = -1;         // exit code, or 128 + signal
  std::string stdout_text, stderr_text;
  int wait_status = 0;  // as waitpid gave it: exited or killed, which signal
};

// Starts argv (PATH lookup) with env changes, stdin from /dev/null, in `cwd` if given.
inline Proc spawn(const Args& argv, const Env& env = {}, const std::string& cwd = "") {
  Proc p;
  p.out = memfd_create("out", MFD_CLOEXEC);
  p.err = memfd_create("err", MFD_CLOEXEC);
  p.pid = fork();
  if (p.pid == 0) {
    dup2(p.out, 1);
    dup2(p.err, 2);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    for (const auto& [k, v] : env) {
      if (v == "\x01")
        unsetenv(k.c_str());
      else
        setenv(k.c_str(), v.c_str(), 1);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> a;
    for (const std::string& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  return p;
}

// Waits (at most timeout_s, then SIGKILL) for the process and collects its output.
inline void finish(Proc* p, double timeout_s = 60) {
  if (p->pid <= 0) return;
  const double end = now_s() + timeout_s;
  int st = 0;
  for (;;) {
    const pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid || (r < 0 && errno != EINTR)) break;
    if (now_s() > end) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &st, 0);
      break;
    }
    usleep(10000);
  }
  p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->wait_status = st;
  p->stdout_text = read_fd(p->out);
  p->stderr_text = read_fd(p->err);
  close(p->out);
  close(p->err);
  p->pid = -1;
}

inline Proc run(const Args& argv, const Env& env = {}, double timeout_s = 60) {
  Proc p = spawn(argv, env);
  finish(&p, timeout_s);
  return p;
}

}  // namespace sprofil::testproc
