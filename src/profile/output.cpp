#include "profile/output.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sprofil::profile {
namespace {

std::string why(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

mode_t private_mode() {
  const mode_t mask = ::umask(077);
  ::umask(mask);
  return 0600 & ~mask;
}

bool write_in_place(const std::string& path, const std::function<bool(int, std::string*)>& body,
                    std::string* error) {
  // O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = errno == ENXIO ? "nobody reads this FIFO" : why("cannot open");
    return false;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  bool ok = body(fd, error);
  if (::close(fd) != 0 && ok) {
    *error = why("close failed");
    ok = false;
  }
  return ok;
}

// Puts the new file tmp at path, in one step whatever is there. Where a file is there, the two
// are exchanged (renameat2 RENAME_EXCHANGE) and the old one, now at tmp, removed: a rename
// that replaces a file makes ext4 (auto_da_alloc) allocate and start writing the new file's
// data before it returns, which a large profile waited for (1.4 s for the 74 MB profile of a
// program with 5,000 objects on the VM of docs/benchmarks.md); the exchange leaves that to
// the kernel's writeback, as for a new name. Where it cannot exchange (nothing there, a file
// system without it), a rename. A directory put at path since the caller looked (lstat) is
// exchanged back and refused, as a rename over it would be (EISDIR).
bool put_in_place(const std::string& tmp, const std::string& path) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    if (::unlink(tmp.c_str()) == 0 || errno != EISDIR) return true;  // the old file, or link
    ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE);
    errno = EISDIR;
    return false;
  }
  return ::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int named_descriptor(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (const std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = path.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoi(digits);
  }
  return -1;
}

bool write_all(int fd, std::string_view bytes, std::string* error) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = why("cannot write");
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool write_output(const std::string& path, const std::function<bool(int fd, std::string*)>& body,
                  std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  std::string problem;
  bool ok;
  struct stat st;
  if (const int own = named_descriptor(path); own >= 0) {
    ok = ::fcntl(own, F_GETFD) >= 0 ? body(own, &problem)
                                    : (problem = "not an open file descriptor", false);
  } else if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      problem = "is a directory";
      ok = false;
    } else {
      ok = write_in_place(path, body, &problem);
    }
  } else {
    std::string tmp = path + ".tmp.XXXXXX";
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) {
      *error = path + ": cannot create a temporary file next to it: " + std::strerror(errno);
      return false;
    }
    ok = ::fchmod(fd, private_mode()) == 0 || (problem = why("cannot set its mode"), false);
    ok = ok && body(fd, &problem);
    if (::close(fd) != 0 && ok) {
      problem = why("close failed");
      ok = false;
    }
    if (ok && !put_in_place(tmp, path)) {
      problem = why("cannot rename the new file into place");
      ok = false;
    }
    if (!ok) {
      const int saved = errno;  // callers may look at why it failed (EFBIG, ENOSPC)
      ::unlink(tmp.c_str());
      errno = saved;
    }
  }
  if (!ok) *error = (path == "-" ? std::string("standard output") : path) + ": " + problem;
  return ok;
}

bool write_output(const std::string& path, std::string_view bytes, std::string* error) {
  return write_output(
      path, [bytes](int fd, std::string* e) { return write_all(fd, bytes, e); }, error);
}

}  // namespace sprofil::profile
