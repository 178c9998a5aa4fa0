// The record workflow (record.hpp): the command's checks (check_command, is_static_elf), the
// private run directory, fork / exec with the agent preloaded and its SPROFIL_* environment,
// collecting the processes' files into one run profile; what it says at the end is summary.cpp's.
#include "record/record.hpp"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "clock/perf.hpp"
#include "format/profile_name.hpp"
#include "format/sprof_format.h"
#include "profile/output.hpp"
#include "profile/profile.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "record/agentless.hpp"
#include "record/buildid_store.hpp"
#include "record/drain.hpp"
#include "record/live_server.hpp"
#include "record/relay.hpp"
#include "record/summary.hpp"
#include "util/clock_ns.hpp"
#include "util/count_of.hpp"

namespace sprofil::record {
namespace {

constexpr const char* kFileName = "p.sprof";  // the agent's SPROFIL_OUTPUT in the run directory

uint64_t now_ns() {
  return util::clock_ns(CLOCK_REALTIME);
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + p : p;
}

bool read_exact(int fd, void* dst, size_t len, off_t off) {
  return pread(fd, dst, len, off) == static_cast<ssize_t>(len);
}

template <typename Ehdr, typename Phdr>
bool has_interp(int fd) {
  Ehdr e;
  if (!read_exact(fd, &e, sizeof e, 0)) return true;  // unreadable: do not claim static
  if (e.e_type != ET_EXEC && e.e_type != ET_DYN) return true;
  if (e.e_phentsize != sizeof(Phdr) || e.e_phnum == 0 || e.e_phnum > 4096) return true;
  for (unsigned i = 0; i < e.e_phnum; ++i) {
    Phdr ph;
    if (!read_exact(fd, &ph, sizeof ph, static_cast<off_t>(e.e_phoff + i * sizeof ph))) return true;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

// A name in the run directory that is an agent's or the drainer's own and never a profile:
// a file being made (naming::create_temp's temporary, renamed to its name once complete) or
// the drainer's socket. Removed with the directory, not reported. (A file system that gives
// no type in its entries, DT_UNKNOWN, is asked by lstat.)
bool is_own_scratch(DIR* d, const dirent* e) {
  if (strncmp(e->d_name, naming::kTempPrefix, strlen(naming::kTempPrefix)) == 0) return true;
  if (e->d_type != DT_UNKNOWN) return e->d_type == DT_SOCK;
  struct stat st;
  return fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode);
}

struct RunDir {
  std::string path;  // empty: none made (sampled from outside)
  // Ends the run for every agent at once: the directory is renamed away (to PATH.end), so that
  // an agent starting from now on finds the run's directory gone (agent/output_file.cpp,
  // run_is_over) and stays silent, instead of making a file that record then removes under it
  // and saying so in the program's stderr (a background job that outlives the run). The
  // drainer and the agents already running hold their files by fd and are not affected. Where
  // the name is taken or the file system cannot rename so, the directory stays where it is.
  void end_run() {
    if (path.empty()) return;
    const std::string ended = path + ".end";
    if (renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, ended.c_str(), RENAME_NOREPLACE) == 0)
      path = ended;
  }
  // Removes the files in it (all created by the agent or the drainer in this private directory)
  // and itself. An agent that opened the directory before end_run() may still make a file in
  // it after it was read: it is read again for that, a few times.
  bool remove() const {
    if (path.empty()) return true;
    for (int pass = 0; pass < 4; ++pass) {
      if (rmdir(path.c_str()) == 0) return true;
      if (errno != ENOTEMPTY && errno != EEXIST) return false;
      DIR* d = opendir(path.c_str());
      if (!d) return false;
      while (dirent* e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
          unlinkat(dirfd(d), e->d_name, 0);
      closedir(d);
    }
    return rmdir(path.c_str()) == 0;
  }
};

struct Collected {
  std::vector<profile::Profile> kept;
  std::vector<std::string> suffixes;
  uint64_t dropped = 0;
  uint64_t dropped_cpu_ns = 0;  // the dropped processes' CPU (their files' cpu_ns)
  uint64_t kept_empty = 0;      // kept without a sample: the root always is kept (a /bin/true)
  std::vector<std::string> unreadable;  // "name: why"
  std::vector<std::string> foreign;     // names of entries that are not the run's profiles
};

// The run profile of what was kept (c's kept profiles moved in, the dropped ones counted); the
// run's totals (CPU, start, end, status) are the caller's to set.
profile::Profile run_profile(Collected& c) {
  profile::Profile run = profile::combine_processes(std::move(c.kept), c.suffixes);
  run.dropped_processes = c.dropped;
  profile::resolve_paths(&run);
  return run;
}

struct Entry {
  std::string suffix;
  profile::Profile p;
};

// The slack of own_cpu's match: a forked child's file that the record parent completed has its
// CPU time reckoned from its event's counter, which may pass the exec's by a period or so.
constexpr uint64_t kExecSlackNs = 2000000;

// Each image's own CPU time. The CPU clock goes on across an exec: the file of an image that an
// exec started holds the process's CPU time, the images' before it included (sprof_format.h's
// start_cpu_ns), and a run of three images of 0.3 s each said 0.3, 0.6 and 0.9 s. The image
// before it is the file of the same pid that finished with at most the CPU time this one
// started with; the latest such (the most CPU). A new process that reused a pid started with
// almost none, and matches only a file of a process that used less. The rate follows.
void own_cpu(std::vector<Entry>* entries) {
  std::vector<uint64_t> base(entries->size(), 0);
  for (size_t b = 0; b < entries->size(); ++b) {
    const profile::Profile& pb = (*entries)[b].p;
    if (pb.start_cpu_ns == 0 || pb.cpu_ns == 0) continue;
    for (size_t a = 0; a < entries->size(); ++a) {
      const profile::Profile& pa = (*entries)[a].p;
      if (a == b || pa.pid != pb.pid || !pa.finished() || pa.cpu_ns == 0 ||
          pa.start_ns > pb.start_ns || pa.cpu_ns > pb.start_cpu_ns + kExecSlackNs)
        continue;
      base[b] = std::max(base[b], std::min(pa.cpu_ns, pb.start_cpu_ns));
    }
  }
  for (size_t b = 0; b < entries->size(); ++b) {
    profile::Profile& p = (*entries)[b].p;
    p.start_cpu_ns = 0;
    if (base[b] == 0 || p.cpu_ns <= base[b]) continue;
    p.cpu_ns -= base[b];
    p.effective_hz = double(p.delivered) * 1e9 / double(p.cpu_ns);
  }
}

// The images that --agentless kept in memory, as collect() gathers files: named as the agent
// names its files (format/profile_name.hpp: the first image "", then ".PID", ".PID.N"), the
// processes without samples dropped but the root.
Collected collect_images(std::vector<Agentless::Image> images) {
  Collected c;
  std::set<std::string> taken;
  for (Agentless::Image& im : images) {
    profile::Profile& p = im.profile;
    if (!im.root && p.delivered == 0 && p.total_samples() == 0) {
      ++c.dropped;
      c.dropped_cpu_ns += p.cpu_ns;
      continue;
    }
    std::string suffix;
    if (!im.root) {
      suffix = "." + std::to_string(p.pid);
      for (int k = 1; taken.count(suffix); ++k)
        suffix = "." + std::to_string(p.pid) + "." + std::to_string(k);
    }
    taken.insert(suffix);
    if (p.total_samples() == 0) ++c.kept_empty;
    c.suffixes.push_back(suffix);
    c.kept.push_back(std::move(p));
  }
  return c;
}

Collected collect(const std::string& dir) {
  Collected c;
  std::vector<Entry> entries;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (is_own_scratch(d, e)) continue;
      std::string why;
      Entry en;
      int pid = 0, k = 0;
      if (name.compare(0, strlen(kFileName), kFileName) != 0 ||
          !naming::parse_profile_suffix(name.c_str() + strlen(kFileName), &pid, &k)) {
        c.foreign.push_back(name);
        continue;
      }
      en.suffix = name.substr(strlen(kFileName));
      if (!profile::read_profile(dir + "/" + name, &en.p, &why)) {
        c.unreadable.push_back(name + ": " + why);
        continue;
      }
      entries.push_back(std::move(en));
    }
    closedir(d);
  }
  own_cpu(&entries);
  // The command's first image first, then by start time.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.suffix.empty() != b.suffix.empty()) return a.suffix.empty();
    if (a.p.start_ns != b.p.start_ns) return a.p.start_ns < b.p.start_ns;
    return a.suffix < b.suffix;
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& en = entries[i];
    const bool root = i == 0;
    if (!root && en.p.delivered == 0 && en.p.total_samples() == 0) {
      ++c.dropped;
      c.dropped_cpu_ns += en.p.cpu_ns;
      continue;
    }
    if (en.p.total_samples() == 0) ++c.kept_empty;
    c.suffixes.push_back(en.suffix);
    c.kept.push_back(std::move(en.p));
  }
  return c;
}

}  // namespace

bool gather_run_dir(const std::string& dir, profile::Profile* run,
                    std::vector<std::string>* skipped, std::string* error) {
  Collected c = collect(dir);
  *skipped = c.unreadable;  // (not c.foreign: the drain socket a killed record left)
  if (c.kept.empty()) {
    *error = std::string("no profile of a run in it (") + kFileName + ", " + kFileName +
             ".PID, ...: a run directory of sprofil record)";
    return false;
  }
  *run = run_profile(c);
  return true;
}

bool is_static_elf(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st;
  unsigned char ident[EI_NIDENT];
  bool is_static = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_exact(fd, ident, sizeof ident, 0) &&
      memcmp(ident, ELFMAG, SELFMAG) == 0) {
    if (ident[EI_CLASS] == ELFCLASS64)
      is_static = !has_interp<Elf64_Ehdr, Elf64_Phdr>(fd);
    else if (ident[EI_CLASS] == ELFCLASS32)
      is_static = !has_interp<Elf32_Ehdr, Elf32_Phdr>(fd);
  }
  close(fd);
  return is_static;
}

CommandCheck check_command(const std::string& command) {
  CommandCheck c;
  std::vector<std::string> candidates;
  if (command.find('/') != std::string::npos) {
    candidates.push_back(command);
  } else if (!command.empty()) {
    const char* env = getenv("PATH");
    const std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
    size_t at = 0;
    while (true) {
      const size_t colon = path.find(':', at);
      std::string dir = path.substr(at, colon == std::string::npos ? colon : colon - at);
      if (dir.empty()) dir = ".";
      candidates.push_back(dir + "/" + command);
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
  }
  bool found_not_executable = false;
  std::string not_executable_path;
  for (const std::string& cand : candidates) {
    struct stat st;
    if (stat(cand.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode) || access(cand.c_str(), X_OK) != 0) {
      if (!found_not_executable) not_executable_path = cand;
      found_not_executable = true;
      continue;
    }
    c.path = cand;
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
      c.launch = Launch::kSecure;
      const bool setuid = (st.st_mode & S_ISUID) && st.st_uid != geteuid();
      c.reason = cand + ": it is " + (setuid ? "setuid" : "setgid") +
                 ", and the dynamic loader ignores LD_PRELOAD for it, so the agent cannot enter "
                 "it; profile a copy without the bit, or link libsprofil and call the API";
    } else if (is_static_elf(cand)) {
      c.launch = Launch::kStatic;
      c.reason = cand +
                 ": it is statically linked, so the preloaded agent cannot enter it; link it "
                 "dynamically, or link libsprofil.a into it and start profiling with the API "
                 "(sprofil_start) or SPROFIL_OUTPUT";
    }
    return c;
  }
  if (found_not_executable) {
    c.launch = Launch::kNotExecutable;
    c.path = not_executable_path;
    c.reason = not_executable_path + ": not executable (" +
               (access(not_executable_path.c_str(), X_OK) != 0 ? std::string(strerror(EACCES))
                                                               : std::string("a directory")) +
               ")";
  } else {
    c.launch = Launch::kNotFound;
    c.reason = command + ": command not found";
  }
  return c;
}

namespace {
// Whether `path` is this process's executable (the same file as /proc/self/exe).
bool names_this_program(const char* path) {
  struct stat a, b;
  return stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// The child's exec of the command (check_command's path): execv, or /bin/sh for a script
// without #!, as execvp does. It returns only on failure: the errno goes to record through
// exec_pipe, and the child exits 127 (not found) or 126.
[[noreturn]] void exec_command(const std::string& path, const std::vector<std::string>& command,
                               int exec_pipe) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(path.c_str(), argv.data());
  int err = errno;
  if (err == ENOEXEC) {
    std::vector<char*> sh{const_cast<char*>("/bin/sh"), const_cast<char*>(path.c_str())};
    sh.insert(sh.end(), argv.begin() + 1, argv.end());
    execv("/bin/sh", sh.data());
    err = errno;
  }
  ssize_t ignored = write(exec_pipe, &err, sizeof err);
  (void)ignored;
  _exit(err == ENOENT ? 127 : 126);
}

// What natively the command would have had from its caller and record's fork takes from it,
// read in record before the fork (capture) and given back in the child (apply).
// - A parent-death signal (prctl PR_SET_PDEATHSIG, kept across exec: a supervisor's or test
//   harness's way to have its children die with it) is record's; fork clears it in the
//   command. Natively the command had it, and died with the caller; under record it outlived
//   both (SIGKILL ended record and left the command running). The command gets the same signal
//   at record's death, so that a chain of deaths ends it as natively.
// - A real-time policy with SCHED_RESET_ON_FORK (`chrt -R`) holds across exec but not fork:
//   natively the command ran with it, under record its fork reset it to SCHED_OTHER (and a
//   negative nice to 0). The command gets the policy, priority and nice value record has.
struct ForkResets {
  int pdeath = 0;
  pid_t record_pid = 0;
  int policy = -1;
  sched_param sched{};
  bool reset_on_fork = false;
  int niceness = 0;
  bool nice_known = false;

  static ForkResets capture() {
    ForkResets r;
    if (prctl(PR_GET_PDEATHSIG, &r.pdeath) != 0) r.pdeath = 0;
    r.record_pid = getpid();
    r.policy = sched_getscheduler(0);
    r.reset_on_fork =
        r.policy >= 0 && (r.policy & SCHED_RESET_ON_FORK) && sched_getparam(0, &r.sched) == 0;
    errno = 0;
    r.niceness = getpriority(PRIO_PROCESS, 0);
    r.nice_known = errno == 0;
    return r;
  }

  void apply() const {
    // (Record may have died before the prctl: then the signal is raised here.)
    if (pdeath != 0 && (prctl(PR_SET_PDEATHSIG, pdeath) != 0 || getppid() != record_pid))
      kill(getpid(), pdeath);
    if (reset_on_fork) {  // (where the caller's privilege allows, as it did the caller's)
      sched_setscheduler(0, policy, &sched);
      if (nice_known) setpriority(PRIO_PROCESS, 0, niceness);
    }
  }
};

// In the child, for a command run with the agent: LD_PRELOAD (the agent before the caller's
// own preloads) and the agent's SPROFIL_* settings; `drain`: the drainer's socket, null for
// a signal per sample.
void set_agent_environment(const Options& o, const std::string& preload, const std::string& file,
                           const Drainer* drain) {
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("SPROFIL_OUTPUT", file.c_str(), 1);
  setenv("SPROFIL_HZ", std::to_string(o.hz).c_str(), 1);
  setenv("SPROFIL_CLOCK", o.clock.c_str(), 1);
  setenv("SPROFIL_RECORD", "1", 1);            // the run's directory goes when the run ends
  if (o.live) setenv("SPROFIL_LIVE", "1", 1);  // the agent serves live snapshots
  if (o.quiet) setenv("SPROFIL_QUIET", "1", 1);
  if (drain)
    setenv("SPROFIL_DRAIN", drain->path().c_str(), 1);
  else
    unsetenv("SPROFIL_DRAIN");
  unsetenv("SPROFIL_STARTED");
}
// The output (`-o`): never touched until the run profile replaces it; its directory (or
// --scratch) must take record's private run directory, checked before the command runs rather
// than after. On success *out is the output's absolute path, *made the run directory made
// (beside the output, or in --scratch; none, "", where it is not `needed`: sampled from
// outside, the command's images are in record's memory, and a directory beside the output
// would be one more entry in the command's working directory, which `tar`, `git status` or
// `find` would see), and 0 is returned; else record's exit status (2), said on log.
int make_run_dir(const Options& o, bool needed, FILE* log, std::string* out_path,
                 std::string* made) {
  // "-", /dev/stdout, /dev/fd/N: the profile goes to that descriptor, and the run directory
  // into --scratch, else $TMPDIR or /tmp (never into /dev).
  const bool to_descriptor = profile::named_descriptor(o.output) >= 0;
  const char* tmpdir = getenv("TMPDIR");
  const std::string out = to_descriptor ? o.output : absolute(o.output);
  struct stat st;
  if (out.back() == '/' || (stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    fprintf(log, "sprofil record: %s: is a directory; -o names the profile file to write\n",
            out.c_str());
    return 2;
  }
  // A file there that is someone's data, not a profile, is not replaced (before the command
  // runs, not after).
  if (std::string why; !profile::may_write_profile_at(out, &why)) {
    fprintf(log, "sprofil record: %s %s\n", out.c_str(), why.c_str());
    return 2;
  }
  const size_t slash = out.rfind('/');
  const std::string dir = !to_descriptor ? (slash == 0 ? "/" : out.substr(0, slash))
                          : tmpdir != nullptr && tmpdir[0] == '/' ? std::string(tmpdir)
                                                                  : std::string("/tmp");
  std::string base = to_descriptor ? std::string("sprofil") : out.substr(slash + 1);
  if (base.size() > 100) base.resize(100);
  // The run directory goes beside the output, or into --scratch: then the output's directory
  // is only checked now (the profile replaces the output at the end, through a file of its own).
  const auto output_dir_refused = [&] {
    fprintf(log, "sprofil record: cannot write the profile %s: cannot create a file in %s: %s\n",
            out.c_str(), dir.c_str(), strerror(errno));
    return 2;
  };
  std::string scratch = o.scratch.empty() ? dir : absolute(o.scratch);
  while (scratch.size() > 1 && scratch.back() == '/') scratch.pop_back();
  if ((!o.scratch.empty() || !needed) && !to_descriptor && access(dir.c_str(), W_OK | X_OK) != 0)
    return output_dir_refused();
  *out_path = out;
  if (!needed) {
    // Nothing is made in --scratch then, but a --scratch that could not take it is the same
    // mistake of the user's, said the same way.
    if (o.scratch.empty() || access(scratch.c_str(), W_OK | X_OK) == 0) return 0;
    fprintf(log, "sprofil record: --scratch %s: cannot make the run directory in it: %s\n",
            o.scratch.c_str(), strerror(errno));
    return 2;
  }
  std::string templ = (scratch == "/" ? "" : scratch) + "/." + base + ".sprofil-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    if (o.scratch.empty()) return output_dir_refused();
    fprintf(log, "sprofil record: --scratch %s: cannot make the run directory in it: %s\n",
            o.scratch.c_str(), strerror(errno));
    return 2;
  }
  *out_path = out;
  *made = buf.data();
  return 0;
}

// Record's default, sampling from outside: the checkpoints and live snapshots set up, and the
// rings' thread started, which opens the events and forks the command with fork_command
// (Agentless::start). The command's pid; -1, with *why, where it could not.
pid_t start_outside(const Options& o, const std::string& out, uint64_t start_ns,
                    const std::function<pid_t()>& fork_command, Agentless* agentless,
                    LiveServer* live, FILE* log, std::string* why) {
  // The run profile as it stands, every --checkpoint seconds into OUT (a new file renamed
  // over the last): a record killed by SIGKILL keeps it, its images unfinished (as a killed
  // command's), its end time 0. Not where OUT is standard output, a pipe or a device.
  struct stat out_st;
  if (o.checkpoint_s > 0 && profile::named_descriptor(out) < 0 &&
      (lstat(out.c_str(), &out_st) != 0 || S_ISREG(out_st.st_mode)))
    agentless->checkpoint(
        static_cast<uint64_t>(o.checkpoint_s * 1e9),
        [out, start_ns, agentless](std::vector<Agentless::Image> images) {
          Collected c = collect_images(std::move(images));
          if (c.kept.empty()) return;
          profile::Profile run = run_profile(c);
          run.run_start_ns = start_ns;
          run.throttled = agentless->stats().throttled;  // (its thread's)
          profile::write_profile(run, out,
                                 nullptr);  // the end's write says why, if it fails
        });
  std::string live_why;
  if (o.live && !live->start(&live_why))
    fprintf(log, "sprofil record: warning: no live snapshots: %s\n", live_why.c_str());
  return agentless->start(o.hz, o.command, fork_command, why);
}
}  // namespace

int record(const Options& asked, FILE* log, int* killed_by) {
  Options o = asked;
  if (killed_by) *killed_by = 0;
  // One malloc arena for record's threads. A thread's own arena grows a page at a time, an
  // mprotect(2) each (glibc pads only the main arena's growth): the rings' thread, whose images
  // grow all run long, made 2.7 of them a process of a loop of short ones (strace), about a
  // fifth of its CPU. The main arena grows by brk(2) with its padding; record's threads rarely
  // allocate at once (the main thread waits in wait4 while the rings' thread reads).
  mallopt(M_ARENA_MAX, 1);
  if (o.command.empty()) {
    fprintf(log, "sprofil record: no command to run\n");
    return 2;
  }
  // Sampled from outside (agentless.hpp) unless the agent is asked for, or needed: a clock
  // other than perf's runs inside, and where perf events are denied the agent's fallback clock
  // samples. Live snapshots of a command sampled from outside are record's (live_server.hpp).
  const bool may_be_perf =
      o.clock == "auto" || o.clock == profile::clock_name(profile::Clock::kPerf);
  // The task clock's shortest period (rt::perf::kMinPeriodNs): at a higher -F each sample
  // would stand for a shorter period than the kernel made it.
  constexpr unsigned kPerfMaxHz = 1000000000u / rt::perf::kMinPeriodNs;
  if (may_be_perf && o.hz > kPerfMaxHz) {
    if (!o.quiet)
      fprintf(log,
              "sprofil record: -F %u: the perf clock takes a sample at most every %u us (the "
              "kernel's floor for its timer): sampling at %u Hz\n",
              o.hz, unsigned(rt::perf::kMinPeriodNs / 1000), kPerfMaxHz);
    o.hz = kPerfMaxHz;
  }
  std::string outside_why;
  bool outside = !o.agent && may_be_perf && Agentless::allowed(&outside_why);
  if (o.agentless && !outside) {
    fprintf(log, "sprofil record: --agentless: cannot sample from outside: %s\n",
            outside_why.c_str());
    return 2;
  }
  if (!outside && access(o.runtime.c_str(), R_OK) != 0) {
    fprintf(log, "sprofil record: runtime library not found: %s (set SPROFIL_LIBRARY)\n",
            o.runtime.c_str());
    return 2;
  }
  // 1. The command: found, executable, enterable by the preloaded agent.
  const CommandCheck check = check_command(o.command[0]);
  switch (check.launch) {
    case Launch::kOk:
      break;
    case Launch::kNotFound:
      fprintf(log, "sprofil record: %s\n", check.reason.c_str());
      return 127;
    case Launch::kNotExecutable:
      fprintf(log, "sprofil record: %s\n", check.reason.c_str());
      return 126;
    case Launch::kStatic:
      if (outside) break;  // nothing is loaded into it: a static program is sampled too
      [[fallthrough]];
    case Launch::kSecure:
      fprintf(log, "sprofil record: cannot profile %s\n", check.reason.c_str());
      return 2;
  }
  // A program this user may run but not read (execute-only) is not dumpable: the kernel ends
  // the perf events of its process at its exec. The agent inside it opens its own.
  if (outside && !o.agentless && check.launch == Launch::kOk &&
      access(check.path.c_str(), R_OK) != 0) {
    outside = false;
    if (access(o.runtime.c_str(), R_OK) != 0) {
      fprintf(log, "sprofil record: runtime library not found: %s (set SPROFIL_LIBRARY)\n",
              o.runtime.c_str());
      return 2;
    }
  }

  // 2. The output, and the run directory.
  std::string out, made;
  if (const int refused = make_run_dir(o, !outside, log, &out, &made)) return refused;
  RunDir rundir{made};

  std::string preload = o.runtime;
  if (const char* cur = getenv("LD_PRELOAD"); cur && *cur) preload += std::string(":") + cur;

  // 3. Run it. Like time(1): the terminal's interrupt goes to the command; we wait for it.
  // A termination signal sent to record alone is relayed to the command (relay.hpp), which
  // also ignores, for the tool only: SIGXFSZ (under a file-size limit, `ulimit -f N; sprofil
  // record`, writing the profile fails with EFBIG, said clearly, instead of killing the tool)
  // and SIGPIPE (where the reader of record's stderr has gone, `sprofil record -- cmd 2>&1 |
  // head`, the closing line would kill record, and its caller would see 141 instead of the
  // command's status).
  SignalRelay relay;
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    fprintf(log, "sprofil record: pipe: %s\n", strerror(errno));
    rundir.remove();
    return 2;
  }
  // Drain mode (the perf clock's default under record): this process holds and drains the
  // program's perf rings (drain.hpp). Without it the agent uses a signal per sample.
  Drainer drainer;
  std::string drain_why;
  // Only a clock that may be perf's: asked for, or "auto" (which the agent resolves).
  const bool drain = may_be_perf && !outside && drainer.start(rundir.path, kFileName, &drain_why);
  if (may_be_perf && !outside && !drain && !o.quiet)
    fprintf(log, "sprofil record: no drain mode (%s): a signal per sample instead\n",
            drain_why.c_str());
  fflush(log);
  const uint64_t start_ns = now_ns();
  const ForkResets resets = ForkResets::capture();
  Agentless agentless;
  LiveServer live(&agentless);  // with --live, sampled from outside
  // The command's fork: in the child, the caller's state given back and the exec.
  const auto fork_command = [&]() -> pid_t {
    const pid_t child = fork();
    if (child != 0) return child;
    resets.apply();
    relay.restore();
    close(exec_pipe[0]);
    // A shell sets `_` to the path of the program it runs: record's. Natively it names the
    // command, where the PATH search found it, and bash scripts read it ($_ at their start).
    if (const char* u = getenv("_"); u && names_this_program(u)) setenv("_", check.path.c_str(), 1);
    // Sampled from outside, the environment is otherwise the caller's, untouched.
    if (outside) {
      agentless.wait_to_exec();  // till record has enabled the events it inherited
      exec_command(check.path, o.command, exec_pipe[1]);
    }
    set_agent_environment(o, preload, rundir.path + "/" + kFileName, drain ? &drainer : nullptr);
    drainer.restore_limits_in_child();
    exec_command(check.path, o.command, exec_pipe[1]);
  };
  pid_t pid;
  if (outside) {
    // Forked by the rings' thread, which holds the events the command inherits (agentless.hpp).
    std::string why;
    pid = start_outside(o, out, start_ns, fork_command, &agentless, &live, log, &why);
    if (pid < 0) {
      fprintf(log, "sprofil record: cannot sample from outside: %s\n", why.c_str());
      close(exec_pipe[0]);
      close(exec_pipe[1]);
      rundir.remove();
      return 2;
    }
  } else {
    pid = fork_command();
    if (pid < 0) {
      fprintf(log, "sprofil record: fork: %s\n", strerror(errno));
      drainer.finish();
      rundir.remove();
      return 2;
    }
  }
  relay.started(pid);
  close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t got;
  while ((got = read(exec_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(exec_pipe[0]);
  int status = 0;
  struct rusage ru {};
  // The command's end is waited for without reaping it (WNOWAIT): the drainer's last pass then
  // finds it a zombie, whose exit code and CPU time it can still read where the agent did not
  // complete its file (drain_ends.cpp, how_it_ended). Then it is reaped.
  relay.wait_for_end();
  const uint64_t end_ns = now_ns();
  rundir.end_run();
  // Everything the kernel sampled up to the end (or the SIGKILL) goes into the files now.
  drainer.finish();
  live.stop();
  agentless.finish();
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  const Drainer::Stats ds = drainer.stats();  // after finish(): all of the run
  // Samples the kernel took that record could not count: said whatever SPROFIL_DRAIN_STATS.
  if (drain) say_not_counted(ds, log);
  if (drain && getenv("SPROFIL_DRAIN_STATS")) say_drain_stats(ds, log);

  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    fprintf(log, "sprofil record: cannot run %s: %s\n", check.path.c_str(), strerror(exec_errno));
    rundir.remove();
    return exec_errno == ENOENT ? 127 : 126;
  }
  int code;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  } else {
    code = 128 + WTERMSIG(status);
    if (killed_by) *killed_by = WTERMSIG(status);
    if (!o.quiet)
      fprintf(log,
              "sprofil record: %s was killed by signal %d (%s); the profile keeps every "
              "sample taken\n",
              o.command[0].c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  const uint64_t run_cpu_ns =
      (static_cast<uint64_t>(ru.ru_utime.tv_sec) + static_cast<uint64_t>(ru.ru_stime.tv_sec)) *
          1000000000u +
      (static_cast<uint64_t>(ru.ru_utime.tv_usec) + static_cast<uint64_t>(ru.ru_stime.tv_usec)) *
          1000u;

  // 4. One run, one profile.
  if (outside) agentless.bound_lost(run_cpu_ns);
  Collected c = outside ? collect_images(agentless.take_images()) : collect(rundir.path);
  if (outside && getenv("SPROFIL_DRAIN_STATS")) say_agentless_stats(agentless.stats(), log);
  if (drain) {  // the processes whose empty files the drainer removed at their exit
    c.dropped += ds.dropped;
    c.dropped_cpu_ns += ds.dropped_cpu_ns;
  }
  for (const std::string& f : c.foreign)
    fprintf(log, "sprofil record: warning: skipped %s: not a profile of this run\n", f.c_str());
  for (const std::string& u : c.unreadable)
    fprintf(log, "sprofil record: warning: skipped %s\n", u.c_str());
  const int failed = code != 0 ? code : 1;
  if (c.kept.empty()) {
    fprintf(log,
            "sprofil record: no profile was written to %s: the agent did not start in %s (the "
            "program %s)\n",
            out.c_str(), o.command[0].c_str(),
            c.unreadable.empty() && c.foreign.empty()
                ? "ended before the agent loaded, cleared LD_PRELOAD from its environment, or "
                  "is statically linked"
                : "left only unreadable files");
    rundir.remove();
    return failed;
  }
  profile::Profile run = run_profile(c);
  run.run_cpu_ns = run_cpu_ns;
  run.run_start_ns = start_ns;
  run.run_end_ns = end_ns;
  run.exit_status = code;
  run.throttled = outside ? agentless.stats().throttled : ds.throttled;
  if (outside) {
    run.unsampled_threads = agentless.stats().unsampled_threads;
    run.unsampled_thread_ticks = agentless.stats().unsampled_credited;
    run.unsampled_processes = agentless.stats().unsampled_processes;
    run.unsampled_process_ticks = agentless.stats().unsampled_process_credited;
  }
  std::string error;
  bool written = profile::write_profile(run, out, &error);
  if (!written && errno == EFBIG && run.processes.size() == 1 &&
      profile::named_descriptor(out) < 0 &&
      rename((rundir.path + "/" + kFileName + c.suffixes[0]).c_str(), out.c_str()) == 0) {
    // The run profile adds a page or two to the process's own file; where the file-size limit
    // leaves no room for them, that file (a complete single-process profile) is the profile.
    fprintf(log,
            "sprofil record: the run profile would pass the file-size limit (RLIMIT_FSIZE); "
            "%s is the process's own profile, without the run's totals\n",
            out.c_str());
    written = true;
  }
  if (!written) {
    fprintf(log,
            "sprofil record: cannot write %s: %s; the processes' files are kept in %s "
            "(sprofil report and merge read them)\n",
            out.c_str(), error.c_str(), rundir.path.c_str());
    return failed;
  }
  if (!rundir.remove())
    fprintf(log, "sprofil record: warning: could not remove %s: %s\n", rundir.path.c_str(),
            strerror(errno));
  if (o.buildid_cache) say_not_kept(keep_objects(run), "record", o.quiet, log);

  Summary said;
  said.out = out;
  said.kept_empty = c.kept_empty;
  said.dropped_cpu_ns = c.dropped_cpu_ns;
  said.outside = outside;
  if (outside) {
    said.kernel = agentless.stats().kernel;
    said.unplaced = agentless.stats().unplaced;
    said.shortened_ns = agentless.stats().shortened_ns;
  }
  say_summary(run, said, o.quiet, log);
  return code;
}

}  // namespace sprofil::record
