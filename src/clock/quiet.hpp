// Quiet: sprofil's signal blocked in this thread for a wait's length while the sampler clock runs
// (sampler.cpp). Its timers run on CLOCK_MONOTONIC and may expire while a thread waits, and a
// handled signal ends the waits that are never restarted (signal(7): the sleeps, the
// multiplexers, pause, the System V IPC waits, sigtimedwait, sockets with a timeout) with EINTR,
// whatever SA_RESTART says. An expiry during the wait is taken when the call returns, late, and
// credits nothing. With any other clock it costs one atomic load; under the sampler clock two
// rt_sigprocmask calls. Async-signal-safe (atomics and rt_sigprocmask); errno is kept.
#pragma once

#include <signal.h>

#include <cerrno>

#include "clock/clock.hpp"
#include "clock/runtime.hpp"
#include "util/nocopy.hpp"

namespace sprofil::rt {

class Quiet : sprofil::util::NoCopy {
 public:
  explicit Quiet(bool may_wait = true) {
    if (!may_wait || !sampler_runs()) return;
    const int s = current_signal();
    if (s <= 0) return;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, s);
    on_ = real_sigmask(SIG_BLOCK, &one, &old_) == 0;
  }
  ~Quiet() {
    if (!on_) return;
    const int e = errno;
    real_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = e;
  }

 private:
  bool on_ = false;
  sigset_t old_;
};

}  // namespace sprofil::rt
