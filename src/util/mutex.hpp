// A pthread mutex held for a scope, and the pthread_atfork trio that keeps one consistent
// across fork(). Runtime code: no exceptions, no libstdc++ containers.
#pragma once

#include <pthread.h>
#include "util/nocopy.hpp"

namespace sprofil::util {

class MutexGuard : NoCopy {
 public:
  explicit MutexGuard(pthread_mutex_t* m) : m_(m) { pthread_mutex_lock(m_); }
  ~MutexGuard() { pthread_mutex_unlock(m_); }

 private:
  pthread_mutex_t* m_;
};

// Held across fork() by the forking thread (prepare), released in the parent, and
// re-initialised in the child, where only the forking thread exists (a lock another thread
// held would never be released there). install() registers the three with pthread_atfork;
// a module that does more around fork calls prepare/parent/child from its own handlers.
template <pthread_mutex_t* M>
struct ForkSafeMutex {
  static void prepare() { pthread_mutex_lock(M); }
  static void parent() { pthread_mutex_unlock(M); }
  static void child() { pthread_mutex_init(M, nullptr); }
  static int install() { return pthread_atfork(prepare, parent, child); }
};

}  // namespace sprofil::util
