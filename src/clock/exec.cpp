// Interposed exec family. Profiling is off in the new program (the seeds' rule) and it must
// never be killed by a profiling signal: ITIMER_PROF survives execve and so do pending
// signals, while the new image starts with SIG_DFL (terminate) for SIGPROF. So every exec
// first stops the clock, discards pending samples and restores the previous disposition; if
// the exec fails, profiling resumes as it was.
#include <alloca.h>
#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/runtime.hpp"

namespace {

// The signals that the calling thread's program blocked and sprofil kept unblocked
// (interpose_signals.cpp), as a set; false if there are none.
bool program_blocked(sigset_t* set) {
  const uint64_t v = sprofil::rt::virtual_blocked();
  if (v == 0) return false;
  sigemptyset(set);
  for (int s = 1; s <= 64; ++s)
    if ((v >> (s - 1)) & 1) sigaddset(set, s);
  return true;
}

// Runs one exec call with profiling suspended around it. The new program gets the mask the
// program asked for: sprofil's signal, where the program blocked it, is blocked for the exec
// (the clock is stopped then, its pending samples discarded), and unblocked again if the
// exec fails. Before, a program that blocked SIGPROF passed it unblocked to what it exec'd.
template <class Call>
int guarded(Call call) {
  sprofil::rt::before_exec();
  sigset_t blocked, was;
  const bool masked =
      program_blocked(&blocked) && sprofil::rt::real_sigmask(SIG_BLOCK, &blocked, &was) == 0;
  const int rc = call();
  const int e = errno;
  if (masked) sprofil::rt::real_sigmask(SIG_SETMASK, &was, nullptr);
  sprofil::rt::after_failed_exec();
  errno = e;
  return rc;
}

// The attributes a spawn passes: attr itself, or where the program blocked sprofil's signal
// and attr sets no mask of its own, a copy (glibc's posix_spawnattr_t is plain data) that sets
// the calling thread's mask with that signal blocked, as the child would inherit it natively.
const posix_spawnattr_t* spawn_attr(const posix_spawnattr_t* attr, posix_spawnattr_t* copy) {
  sigset_t blocked, mask;
  if (!program_blocked(&blocked)) return attr;
  short flags = 0;
  if (attr && posix_spawnattr_getflags(attr, &flags) != 0) return attr;
  if (flags & POSIX_SPAWN_SETSIGMASK) return attr;
  if (attr)
    *copy = *attr;
  else if (posix_spawnattr_init(copy) != 0)
    return attr;
  if (sprofil::rt::real_sigmask(SIG_BLOCK, nullptr, &mask) != 0) return attr;
  sigorset(&mask, &mask, &blocked);
  posix_spawnattr_setsigmask(copy, &mask);
  posix_spawnattr_setflags(copy, static_cast<short>(flags | POSIX_SPAWN_SETSIGMASK));
  return copy;
}

// Runs call(env) with the environment an exec or a spawn passes: envp itself, or, where the
// new program could not run the agent (exec_env.cpp: a seccomp filter, libsprofil not
// readable from the new program's root or user), a copy without sprofil's variables and
// without libsprofil in LD_PRELOAD. The copy is on this stack (a vfork child may exec), on the heap
// if it is very large (it is not freed: the exec replaces the image; a failed one leaks it).
template <class Call>
int with_env(char* const envp[], Call call) {
  if (!sprofil::rt::exec_unprofiled(envp)) return call(envp);
  size_t preload_len = 0;
  const size_t n = sprofil::rt::unprofiled_env_sizes(envp, &preload_len);
  constexpr size_t kOnStack = 64 * 1024;
  const bool small = (n + 1) * sizeof(char*) + preload_len + 1 <= kOnStack;
  auto** out = static_cast<char**>(small ? alloca((n + 1) * sizeof(char*))
                                         : malloc((n + 1) * sizeof(char*)));
  auto* preload = static_cast<char*>(small ? alloca(preload_len + 1) : malloc(preload_len + 1));
  if (!out || !preload) return call(envp);
  sprofil::rt::unprofiled_env(envp, out, preload);
  return call(out);
}

using execve_fn = int (*)(const char*, char* const[], char* const[]);
using fexecve_fn = int (*)(int, char* const[], char* const[]);
using execveat_fn = int (*)(int, const char*, char* const[], char* const[], int);
std::atomic<execve_fn> g_execve{nullptr}, g_execvpe{nullptr};
std::atomic<fexecve_fn> g_fexecve{nullptr};
std::atomic<execveat_fn> g_execveat{nullptr};

// Runs exec(argv, envp) on the variadic arguments of execl/execlp/execle, collected into a
// malloc'd argv (and, with_env, the envp that follows its NULL); errno is exec's.
template <class Exec>
int exec_list(const char* arg0, va_list ap, bool with_env, Exec exec) {
  va_list count;
  va_copy(count, ap);
  size_t n = 1;
  while (va_arg(count, char*) != nullptr) ++n;
  va_end(count);
  auto** argv = static_cast<char**>(malloc((n + 1) * sizeof(char*)));
  if (!argv) return errno = ENOMEM, -1;
  argv[0] = const_cast<char*>(arg0);
  for (size_t i = 1; i <= n; ++i) argv[i] = va_arg(ap, char*);  // includes the final NULL
  char** envp = with_env ? va_arg(ap, char**) : nullptr;
  const int rc = exec(argv, envp);
  const int e = errno;
  free(argv);
  errno = e;
  return rc;
}

}  // namespace

#include "util/export.hpp"

SPROFIL_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  auto f = sprofil::rt::real_fn(g_execve, "execve");
  return with_env(envp,
                  [&](char* const* env) { return guarded([&] { return f(path, argv, env); }); });
}

// execv and execvp pass environ: they are execve and execvpe with it (as in glibc).
SPROFIL_EXPORT int execv(const char* path, char* const argv[]) {
  return execve(path, argv, environ);
}

SPROFIL_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  auto f = sprofil::rt::real_fn(g_execvpe, "execvpe");
  return with_env(envp,
                  [&](char* const* env) { return guarded([&] { return f(file, argv, env); }); });
}

SPROFIL_EXPORT int execvp(const char* file, char* const argv[]) {
  return execvpe(file, argv, environ);
}

SPROFIL_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  auto f = sprofil::rt::real_fn(g_fexecve, "fexecve");
  return with_env(envp,
                  [&](char* const* env) { return guarded([&] { return f(fd, argv, env); }); });
}

SPROFIL_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                            int flags) {
  auto f = sprofil::rt::real_fn(g_execveat, "execveat");
  return with_env(envp, [&](char* const* env) {
    return guarded([&] { return f(dirfd, path, argv, env, flags); });
  });
}

// posix_spawn and posix_spawnp start a new program without an exec of this image: only their
// environment is concerned (with_env).
using spawn_fn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                         const posix_spawnattr_t*, char* const[], char* const[]);
std::atomic<spawn_fn> g_posix_spawn{nullptr}, g_posix_spawnp{nullptr};

SPROFIL_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                               const posix_spawnattr_t* attr, char* const argv[],
                               char* const envp[]) {
  auto f = sprofil::rt::real_fn(g_posix_spawn, "posix_spawn");
  posix_spawnattr_t copy;
  const posix_spawnattr_t* a = spawn_attr(attr, &copy);
  return with_env(envp, [&](char* const* env) { return f(pid, path, fa, a, argv, env); });
}

SPROFIL_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                                const posix_spawnattr_t* attr, char* const argv[],
                                char* const envp[]) {
  auto f = sprofil::rt::real_fn(g_posix_spawnp, "posix_spawnp");
  posix_spawnattr_t copy;
  const posix_spawnattr_t* a = spawn_attr(attr, &copy);
  return with_env(envp, [&](char* const* env) { return f(pid, file, fa, a, argv, env); });
}

// execl, execlp and execle: their variadic list collected by exec_list and passed to CALL,
// which names the collected `argv` and `envp`.
#define SPROFIL_EXEC_LIST(NAME, FIRST, WITH_ENV, CALL)                                         \
  SPROFIL_EXPORT int NAME(const char* FIRST, const char* arg, ...) {                           \
    va_list ap;                                                                                \
    va_start(ap, arg);                                                                         \
    const int rc = exec_list(arg, ap, WITH_ENV,                                                \
                             [&](char** argv, [[maybe_unused]] char** envp) { return CALL; }); \
    va_end(ap);                                                                                \
    return rc;                                                                                 \
  }
SPROFIL_EXEC_LIST(execl, path, false, execv(path, argv))
SPROFIL_EXEC_LIST(execlp, file, false, execvp(file, argv))
SPROFIL_EXEC_LIST(execle, path, true, execve(path, argv, envp))

namespace sprofil::rt {
namespace {
bool g_exec_suspended = false;  // stopped by before_exec(); restarted if exec fails
bool g_exec_untouched = false;  // before_exec() left sampling on: the exec ends it (drain mode)
}  // namespace

void before_exec() {
  if (sandboxed()) return;
  if (getpid() != g_pid) {
    // A vfork child (dash's, a program's) shares our memory but has none of our timers: it
    // touches nothing of ours. Its dispositions are its own, though, and an exec keeps an
    // ignored signal ignored (a handler it resets): where the program ignores our signal and
    // the child left our handler on it, the new program must find it ignored, as natively
    // (SIGPROF ignored, then a profiling timer of its own, would kill it).
    const int signo = g_signo;
    struct sigaction now;
    if (signo != 0 && g_prev_action.sa_handler == SIG_IGN &&
        real_sigaction(signo, nullptr, &now) == 0 && handler_is_ours(now)) {
      struct sigaction ign;
      memset(&ign, 0, sizeof ign);
      ign.sa_handler = SIG_IGN;
      real_sigaction(signo, &ign, nullptr);
    }
    return;
  }
  Lock lock;
  if (!g_active) return;
  // A clock whose sampling the exec itself ends (a forked child in perf's drain mode:
  // ClockOps::ends_at_exec): nothing to stop, no flush exchange; its samples up to the exec
  // are in the parent's rings. It takes no signal: none can be pending at the exec.
  if (const auto ends = clock_ops(g_clock.kind).ends_at_exec; g_signo == 0 && ends && ends()) {
    g_exec_untouched = true;
    return;
  }
  // The clock first: its last samples (in drain mode the parent's credit for the time since
  // the last one) must be in the file the hook completes, or removes when it holds none.
  stop_clock();
  if (g_hooks.before_exec) g_hooks.before_exec();
  g_exec_suspended = true;
}

void after_failed_exec() {
  if (sandboxed() || getpid() != g_pid) return;
  Lock lock;
  if (std::exchange(g_exec_untouched, false)) return;  // sampling went on: nothing to resume
  if (!g_exec_suspended) return;
  g_exec_suspended = false;
  // The hook first: the clock's first samples (and drain mode's hand-over of the file) go to
  // the file it resumes or makes again.
  if (g_hooks.after_failed_exec) g_hooks.after_failed_exec();
  (void)start_clock(g_clock);
}

}  // namespace sprofil::rt
