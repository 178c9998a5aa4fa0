// Creating the files the host tools write (profiles, reports, pprof and gmon output), safely:
// never following a link, never truncating a file, private by default.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace sprofil::profile {

// Writes `path`:
// - "-" is standard output, and a name of one of this process's open descriptors (/dev/stdout,
//   /dev/stderr, /dev/fd/N, /proc/self/fd/N) is that descriptor, as in a shell's redirection:
//   written to, never replaced (those names are links: replacing /dev/stdout would break the
//   system's);
// - an existing non-regular file (a character device such as /dev/null, a FIFO) is written in
//   place and never replaced; a FIFO nobody reads is an error, not a hang;
// - anything else (a new name, a regular file, a symbolic link) gets a new private file: a
//   temporary file in the same directory, mode 0600 less the umask, renamed into place once
//   complete. A link at `path` is replaced, never followed; an existing file is replaced,
//   never truncated, and keeps its data if anything fails.
// `body` writes the contents to fd (which is seekable unless `path` is not a regular file).
// Every write error (a full disk, EPIPE, ...) is reported: false, with *error naming the path.
bool write_output(const std::string& path, const std::function<bool(int fd, std::string*)>& body,
                  std::string* error);
bool write_output(const std::string& path, std::string_view bytes, std::string* error);

// The descriptor `path` names as this process's own ("-", /dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/self/fd/N), open or not; -1 for any other path.
int named_descriptor(const std::string& path);

// write(2) of all of `bytes`, retrying on EINTR and short writes.
bool write_all(int fd, std::string_view bytes, std::string* error);

}  // namespace sprofil::profile
