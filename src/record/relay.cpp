#include "record/relay.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "util/clock_ns.hpp"

namespace sprofil::record {
namespace {

volatile sig_atomic_t g_command = 0;   // the pid relayed to; 0: none
volatile sig_atomic_t g_deferred = 0;  // a signal to relay if the command still runs later

void relay(int sig, siginfo_t* si, void*) {
  // The terminal's (SI_KERNEL) went to the command too.
  if (si->si_code != SI_KERNEL && g_command > 0) g_deferred = sig;
}

}  // namespace

SignalRelay::SignalRelay() {
  sigset_t block;
  sigemptyset(&block);
  for (int s : kSignals) sigaddset(&block, s);
  sigprocmask(SIG_BLOCK, &block, &old_mask_);
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
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  sigset_t four, was;
  sigemptyset(&four);
  for (int s : kSignals) sigaddset(&four, s);
  sigprocmask(SIG_BLOCK, &four, &was);
  uint64_t due = 0;  // when the deferred signal is relayed (CLOCK_MONOTONIC ns); 0: none
  for (;;) {
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
      const int r = ppoll(&p, 1, timeout, &was);
      if (r == 1) break;              // ended: its pidfd is readable
      if (r < 0 && errno != EINTR) {  // (cannot wait on it: waitid from now on)
        close(pidfd);
        pidfd = -1;
      }
      continue;  // a signal, or the deferred one's time
    }
    sigprocmask(SIG_SETMASK, &was, nullptr);
    siginfo_t si{};
    const int r = waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOWAIT);
    const int e = errno;
    sigprocmask(SIG_BLOCK, &four, nullptr);
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

}  // namespace sprofil::record
