#include "record/relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "util/clock_ns.hpp"
#include "util/join.hpp"

namespace sprofil::record {
namespace {

volatile sig_atomic_t g_command = 0;    // the pid relayed to; 0: none
volatile sig_atomic_t g_deferred = 0;   // a signal to relay if the command still runs later
volatile sig_atomic_t g_continued = 0;  // record got a SIGCONT (stop_with_command)

void relay(int sig, siginfo_t* si, void*) {
  // The terminal's (SI_KERNEL) went to the command too.
  if (si->si_code != SI_KERNEL && g_command > 0) g_deferred = sig;
}

// SIGCHLD only ends the wait's ppoll (EINTR): the command stopped or ended.
void on_child(int) {}

void on_continue(int) {
  g_continued = 1;
}

// The signals that only the waiting (main) thread takes: the four, SIGCHLD and SIGCONT. Blocked
// from the relay's start, so that the drainer's thread, started after it, keeps them blocked.
sigset_t taken_by_wait(const int (&four)[4]) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : four) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGCONT);
  return set;
}

}  // namespace

SignalRelay::SignalRelay() {
  const sigset_t block = taken_by_wait(kSignals);
  sigprocmask(SIG_BLOCK, &block, &old_mask_);
  // A caller that ignores SIGCHLD (inherited across exec, as from some daemons) would have the
  // kernel reap the command at its end: record could not read its status (it said "exited 0"
  // for any end). Record takes SIGCHLD's end itself; the command gets the caller's disposition
  // back (restore()).
  // The terminal's stops (^Z; a read or write of it from the background) go to the whole
  // group: record ignores them, and stops when the command does (stop_with_command), so that a
  // command that ignores them (natively: ^Z does nothing) is not stopped by record's stop.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int i = 0; i < kIgnoredCount; ++i) sigaction(kIgnored[i], &ign, &old_ignored_[i]);
  struct sigaction child {};
  child.sa_handler = on_child;
  child.sa_flags = SA_RESTART;  // (the wait's ppoll ends all the same)
  sigfillset(&child.sa_mask);
  sigaction(SIGCHLD, &child, &old_chld_);
  struct sigaction sa {};
  sa.sa_sigaction = relay;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: the wait sees a deferred relay (EINTR)
  sigfillset(&sa.sa_mask);
  for (int i = 0; i < 4; ++i) {
    sigaction(kSignals[i], nullptr, &old_[i]);
    if (old_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &sa, nullptr);
  }
}

SignalRelay::~SignalRelay() {
  g_command = 0;
  g_deferred = 0;
  restore();
}

void SignalRelay::restore() const {
  for (int i = 0; i < 4; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  sigaction(SIGCHLD, &old_chld_, nullptr);
  for (int i = 0; i < kIgnoredCount; ++i) sigaction(kIgnored[i], &old_ignored_[i], nullptr);
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

void SignalRelay::started(pid_t pid) {
  pid_ = pid;
  g_command = pid;
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

void SignalRelay::wait_for_end() {
  // The four signals are unblocked only inside the wait (ppoll's mask), so that one that comes
  // between a look at g_deferred and the wait ends the wait. Where the kernel has no pidfds
  // (before Linux 5.3), waitid, and a signal is relayed at once.
  // SIGCHLD too, which a stop of the command sends (a stop's report is looked for at each turn,
  // so that one before the wait is seen as well).
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  const sigset_t four = taken_by_wait(kSignals);
  sigset_t was;
  sigprocmask(SIG_BLOCK, &four, &was);
  sigset_t inside = was;  // the wait's mask: the caller's, with SIGCHLD taken
  sigdelset(&inside, SIGCHLD);
  uint64_t due = 0;  // when the deferred signal is relayed (CLOCK_MONOTONIC ns); 0: none
  for (;;) {
    reap_adopted();
    siginfo_t stopped{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &stopped, WSTOPPED | WNOHANG) == 0 &&
        stopped.si_pid == pid_ && stopped.si_code == CLD_STOPPED) {
      stop_with_command(stopped.si_status);
      continue;
    }
    const uint64_t now = util::clock_ns(CLOCK_MONOTONIC);
    if (g_deferred && due == 0) due = now + kGraceMs * 1000000ull;
    if (due != 0 && (now >= due || pidfd < 0)) {
      kill(pid_, g_deferred);  // not reaped yet: still the command's pid
      g_deferred = 0;
      due = 0;
      continue;
    }
    if (pidfd >= 0) {
      timespec left{}, *timeout = nullptr;
      if (due != 0) {
        left.tv_sec = static_cast<time_t>((due - now) / 1000000000u);
        left.tv_nsec = static_cast<long>((due - now) % 1000000000u);
        timeout = &left;
      }
      pollfd p{pidfd, POLLIN, 0};
      const int r = ppoll(&p, 1, timeout, &inside);
      if (r == 1) break;              // ended: its pidfd is readable
      if (r < 0 && errno != EINTR) {  // (cannot wait on it: waitid from now on)
        close(pidfd);
        pidfd = -1;
      }
      continue;  // a signal, or the deferred one's time
    }
    sigprocmask(SIG_SETMASK, &inside, nullptr);
    siginfo_t si{};
    const int r = waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WSTOPPED | WNOWAIT);
    const int e = errno;
    sigprocmask(SIG_BLOCK, &four, nullptr);
    if (r == 0 && si.si_code == CLD_STOPPED) continue;  // (taken at the loop's top)
    if (r == 0 || e != EINTR) break;
  }
  siginfo_t si{};  // (at once: it has ended)
  while (waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  g_command = 0;
  g_deferred = 0;
  // While record writes the profile (a few ms) the four are ignored: its writes then see no
  // EINTR (the relay's handler has no SA_RESTART), and the profile is written whole.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int i = 0; i < 4; ++i)
    if (old_[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &ign, nullptr);
  sigprocmask(SIG_SETMASK, &was, nullptr);
  if (pidfd >= 0) close(pidfd);
}

void SignalRelay::reap_adopted() const {
  if (getpid() != 1) return;
  for (;;) {
    siginfo_t si{};
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
        si.si_pid == pid_)
      return;
    waitpid(si.si_pid, nullptr, WNOHANG);
  }
}

// While record is stopped with its command, a process of record's that continues it when the
// command is continued (or ends) by anyone else: `kill -CONT PID` of the command alone, a
// debugger's or a supervisor's. Record, stopped, cannot see it; before, it stayed stopped for
// good, its command a zombie, and its caller waited forever. It polls the command's state in
// /proc every 10 ms, with async-signal-safe calls only (record has threads), and record ends it
// once continued. Its pid, or -1.
pid_t SignalRelay::start_waker() const {
  char path[48];
  util::Join(path, sizeof path).add("/proc/").add(static_cast<long>(pid_)).add("/stat");
  const pid_t record = getpid();
  const pid_t waker = fork();
  if (waker != 0) return waker;
  for (;;) {
    const timespec tick{0, 10000000};
    nanosleep(&tick, nullptr);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;  // reaped: gone
    char stat[512];
    const ssize_t len = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (len <= 0) break;
    // "pid (comm) S ...": the state after the last ')' (a comm may hold one).
    ssize_t i = len - 1;
    while (i > 0 && stat[i] != ')') --i;
    if (i + 2 >= len || (stat[i + 2] != 'T' && stat[i + 2] != 't')) break;
  }
  // Until record, continued, ends this process (a SIGCONT before record's own stop is lost);
  // not past record's end.
  while (getppid() == record && kill(record, SIGCONT) == 0) {
    const timespec tick{0, 10000000};
    nanosleep(&tick, nullptr);
  }
  _exit(0);
}

void SignalRelay::stop_with_command(int sig) const {
  // Record stops by the same signal, with its default action (record ignores SIGTSTP, SIGTTIN
  // and SIGTTOU otherwise). The kernel discards the three in an orphaned process group, where
  // the command's stop came from elsewhere: record then goes on without a stop, and leaves the
  // command stopped, as a native caller would.
  g_continued = 0;
  struct sigaction cont {
  }, old_cont{}, dfl{}, old_sig{};
  cont.sa_handler = on_continue;
  sigfillset(&cont.sa_mask);
  sigaction(SIGCONT, &cont, &old_cont);
  dfl.sa_handler = SIG_DFL;
  if (sig != SIGSTOP) sigaction(sig, &dfl, &old_sig);
  sigset_t these, was;
  sigemptyset(&these);
  sigaddset(&these, sig);
  sigaddset(&these, SIGCONT);
  sigprocmask(SIG_UNBLOCK, &these, &was);
  const pid_t waker = start_waker();
  raise(sig);  // stopped here until a SIGCONT, whose handler runs in this thread
  sigprocmask(SIG_SETMASK, &was, nullptr);
  if (waker > 0) {
    kill(waker, SIGKILL);
    waitpid(waker, nullptr, 0);
  }
  if (sig != SIGSTOP) sigaction(sig, &old_sig, nullptr);
  sigaction(SIGCONT, &old_cont, nullptr);
  if (!g_continued) return;
  // The SIGCONT that continued record may have been the group's (a shell's `fg`, `bg`): the
  // command then reports being continued, at once or within the group's delivery. Else (sent to
  // record alone) the command still stops: it is continued too.
  for (int i = 0; i < 5; ++i) {
    siginfo_t si{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &si, WCONTINUED | WNOHANG) == 0 && si.si_pid == pid_)
      return;
    const timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  kill(pid_, SIGCONT);
}

}  // namespace sprofil::record
