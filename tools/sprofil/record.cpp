// sprofil record: runs a command with the agent preloaded and reports where the profile went.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "profile/profile.hpp"
#include "profile/sprof_format.h"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct RecordOptions {
  unsigned hz = 1000;
  std::string clock = "auto";
  std::string output = "sprofil.data";
  std::vector<std::string> command;
};

bool file_exists(const std::string& p) {
  return access(p.c_str(), R_OK) == 0;
}

// libsprofil.so next to this tool (build tree or install prefix), unless SPROFIL_LIBRARY says.
std::string find_runtime() {
  if (const char* env = getenv("SPROFIL_LIBRARY")) return env;
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir.erase(dir.rfind('/'));
    for (const char* rel : {"/../lib/libsprofil.so", "/../lib64/libsprofil.so"}) {
      std::string p = dir + rel;
      if (file_exists(p)) {
        char real[PATH_MAX];
        return realpath(p.c_str(), real) ? std::string(real) : p;
      }
    }
  }
  return SPROFIL_INSTALL_LIBDIR "/libsprofil.so";
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + p : p;
}

// Reads the sample tallies from the file's header (a plain read: no reader library needed).
bool read_tallies(const std::string& path, sprof_header* h) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = pread(fd, h, sizeof *h, 0) == static_cast<ssize_t>(sizeof *h) &&
                  memcmp(h->magic, SPROF_MAGIC, 8) == 0;
  close(fd);
  return ok;
}

int run(const RecordOptions& o) {
  if (o.command.empty()) {
    fprintf(stderr, "sprofil record: no command to run\n");
    return 2;
  }
  const std::string lib = find_runtime();
  if (!file_exists(lib)) {
    fprintf(stderr, "sprofil record: runtime library not found: %s (set SPROFIL_LIBRARY)\n",
            lib.c_str());
    return 2;
  }
  const std::string out = absolute(o.output);
  // A profile left by an earlier run must never pass for this one's (say the command fails
  // to start): remove it first.
  if (unlink(out.c_str()) != 0 && errno != ENOENT) {
    fprintf(stderr, "sprofil record: cannot replace %s: %s\n", out.c_str(), strerror(errno));
    return 2;
  }
  std::string preload = lib;
  if (const char* cur = getenv("LD_PRELOAD"); cur && *cur) preload += std::string(":") + cur;

  // Like time(1): the terminal's interrupt goes to the command; we wait for it to end.
  struct sigaction ign {
  }, old_int{}, old_quit{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t start_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
  const pid_t pid = fork();
  if (pid < 0) {
    perror("sprofil record: fork");
    return 2;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("SPROFIL_OUTPUT", out.c_str(), 1);
    setenv("SPROFIL_HZ", std::to_string(o.hz).c_str(), 1);
    setenv("SPROFIL_CLOCK", o.clock.c_str(), 1);
    unsetenv("SPROFIL_STARTED");
    std::vector<char*> argv;
    for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fprintf(stderr, "sprofil record: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);

  int code;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  } else {
    code = 128 + WTERMSIG(status);
    fprintf(stderr,
            "sprofil record: %s was killed by signal %d (%s); the profile keeps every "
            "sample taken\n",
            o.command[0].c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  sprof_header h;
  // Forked children and exec'd programs wrote FILE.PID[.N] files of their own.
  const size_t slash = out.rfind('/');
  const std::string dir = out.substr(0, slash), base = out.substr(slash + 1) + ".";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, base.size(), base) != 0 || name.size() == base.size() ||
          name.find_first_not_of("0123456789.", base.size()) != std::string::npos)
        continue;
      const std::string p = dir + "/" + name;
      if (read_tallies(p, &h) && h.start_ns >= start_ns)
        fprintf(stderr, "sprofil record: wrote %s: %llu samples (pid %d)\n", p.c_str(),
                static_cast<unsigned long long>(h.delivered), h.pid);
    }
    closedir(d);
  }
  if (read_tallies(out, &h)) {
    fprintf(stderr, "sprofil record: wrote %s: %llu samples (%s clock, %u Hz requested)\n",
            out.c_str(), static_cast<unsigned long long>(h.delivered),
            profile::clock_name(profile::Clock(h.clock)), h.requested_hz);
  } else if (code != 127) {
    fprintf(stderr, "sprofil record: no profile was written to %s\n", out.c_str());
  }
  return code;
}

}  // namespace

Run setup_record(CLI::App& sub) {
  auto opts = std::make_shared<RecordOptions>();
  sub.add_option("-F,--frequency", opts->hz, "Samples per second and thread")
      ->check(CLI::Range(1u, 1000000u));
  sub.add_option("--clock", opts->clock,
                 "Sampling clock: auto (perf where allowed, else cpu), perf (per-thread perf "
                 "event on the task clock), cpu (per-thread CPU-time timers), itimer (process "
                 "ITIMER_PROF) or wall (per-thread wall clock: on- and off-CPU time)")
      ->check(CLI::IsMember({"auto", "perf", "cpu", "itimer", "wall"}))
      ->capture_default_str();
  sub.add_option("-o,--output", opts->output, "Profile file to write")->capture_default_str();
  sub.add_option("command", opts->command, "The command and its arguments")->required();
  sub.prefix_command();
  return [opts] { return run(*opts); };
}

}  // namespace sprofil::tool
