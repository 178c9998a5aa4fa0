// Helpers shared by the face tests: CPU burning, bad memory, and running a case in a fresh
// forked process.
#pragma once

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

namespace sprofil::faces_test {

inline double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Burns `ms` of this thread's CPU time in a tight loop (no calls inside the loop). noipa: no
// constant-propagated clone elsewhere in the text (-O3 made one for burn_cpu_ms(5)).
__attribute__((noinline, noipa)) inline void burn_cpu_ms(double ms) {
  const double end = thread_cpu_ms() + ms;
  volatile uint64_t x = 1;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  } while (thread_cpu_ms() < end);
}

// Burns CPU in 5 ms steps until done() holds or max_ms have been burned; returns done().
// CPU-time timers are checked only at kernel ticks that find the thread running, so on a
// loaded machine the samples of a short burn can arrive some milliseconds late: tests wait
// for the samples they need instead of guessing how long that takes.
template <class Pred>
bool burn_until(Pred done, double max_ms = 1000) {
  for (double spent = 0; spent < max_ms; spent += 5) {
    if (done()) return true;
    burn_cpu_ms(5);
  }
  return done();
}

// Burns `ms` of CPU, then on until done() holds (burn_until): for tests that stop profiling and
// then count what the burn got. On a machine overloaded five times over, 40 ms of CPU under
// the cpu clock once had 20 samples counted, and once none, when profiling stopped.
template <class Pred>
bool burn_for(double ms, Pred done, double max_ms = 1000) {
  burn_cpu_ms(ms);
  return burn_until(done, max_ms);
}

// A catch-all text offset: 32 KiB below burn_cpu_ms, so that with scale 2 every pc of the
// burn loop lands in the first elements of a small buffer.
inline uintptr_t catch_offset() {
  return reinterpret_cast<uintptr_t>(&burn_cpu_ms) - 0x8000;
}

// An address with no mapping behind it (one page).
inline void* unmapped_page() {
  const long pg = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, static_cast<size_t>(pg), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(p, static_cast<size_t>(pg));
  return p;
}

// A read-only page (leaked on purpose: the tests are short).
inline void* readonly_page() {
  const long pg = sysconf(_SC_PAGESIZE);
  return mmap(nullptr, static_cast<size_t>(pg), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

// In a child: a fault (SIGSEGV, SIGBUS) writes where it happened and the stack to stderr,
// then kills the child with that signal as before, so that a rare crash in CI says where.
inline void report_faults() {
  struct sigaction sa {};
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sa.sa_sigaction = [](int sig, siginfo_t* si, void*) {
    char line[96];
    const int n = snprintf(line, sizeof line, "child fault: signal %d at address %p, stack:\n", sig,
                           si->si_addr);
    if (n > 0 && write(2, line, static_cast<size_t>(n)) < 0) _exit(128 + sig);
    void* frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    raise(sig);  // SA_RESETHAND: the default action now
  };
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

// Runs fn in a forked child and returns its message: "" when it succeeded, else what failed
// (or how the child died).
inline std::string in_child(const std::function<std::string()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    report_faults();
    const std::string msg = fn();
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st))
    return out + " [child killed by signal " + std::to_string(WTERMSIG(st)) + "]";
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return out + " [child exit " + std::to_string(WEXITSTATUS(st)) + "]";
  return out;
}

}  // namespace sprofil::faces_test

// Checks inside a child body (which returns the failure text).
#define CK(cond)                                                                             \
  do {                                                                                       \
    if (!(cond)) return std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #cond; \
  } while (0)
#define CKM(cond, msg)                                                                 \
  do {                                                                                 \
    if (!(cond))                                                                       \
      return std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #cond " " + \
             std::string(msg);                                                         \
  } while (0)
