// Record's side of the build-id cache (buildid_store.hpp).
#include "record/buildid_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>

#include "format/sprof_format.h"
#include "profile/buildid_cache.hpp"
#include "profile/output.hpp"
#include "record/elf_file.hpp"

namespace sprofil::record {
namespace {

constexpr uint64_t kDefaultLimitMb = 2048;

uint64_t limit_bytes() {
  const char* v = secure_getenv("SPROFIL_BUILDID_CACHE_MB");
  char* end = nullptr;
  const unsigned long long mb = v != nullptr && *v != '\0' ? strtoull(v, &end, 10) : 0;
  return (v != nullptr && *v != '\0' && *end == '\0' ? mb : kDefaultLimitMb) << 20;
}

// mkdir -p of `dir` (mode 0700 for what it makes), then the directory itself opened without
// following a link at its last component, and only if it is the caller's and private. Root
// makes nothing in another user's directory (sudo keeps the user's HOME): that user's own runs
// could not use a cache of root's.
int open_cache_dir(const std::string& dir, std::string* why) {
  uid_t owner = 0;  // of the deepest directory that exists
  for (size_t at = 1; at != std::string::npos;) {
    at = dir.find('/', at + 1);
    const std::string part = dir.substr(0, at);
    struct stat st;
    if (stat(part.c_str(), &st) == 0) {
      owner = st.st_uid;
      continue;
    }
    if (geteuid() == 0 && owner != 0) {
      *why = part + ": not made by root in another user's directory";
      return -1;
    }
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = part + ": " + strerror(errno);
      return -1;
    }
    owner = geteuid();
  }
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) {
    *why = dir + ": " + strerror(errno);
    return -1;
  }
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    *why = dir + ": not a private directory of this user's (mode 0700, owned by uid " +
           std::to_string(geteuid()) + ")";
    close(fd);
    return -1;
  }
  return fd;
}

// The byte-for-byte copy of `from` into the new file `to_fd`.
bool copy_file(int from, int to_fd, std::string* why) {
  for (;;) {
    const ssize_t n = copy_file_range(from, nullptr, to_fd, nullptr, 1 << 30, 0);
    if (n == 0) return true;
    if (n > 0) continue;
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) break;
    char buf[1 << 16];  // a file system without copy_file_range between these two
    for (;;) {
      const ssize_t r = read(from, buf, sizeof buf);
      if (r == 0) return true;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) break;
      if (!profile::write_all(to_fd, std::string_view(buf, static_cast<size_t>(r)), why))
        return false;
    }
    break;
  }
  *why = strerror(errno);
  return false;
}

// Keeps one object: `sub` is its build-id's first-byte directory, `name` the rest of the hex.
// Returns "" on success (stored or present), else why not.
std::string keep_one(const std::string& dir, int sub, const std::string& name,
                     const profile::Region& r, KeptObjects* out) {
  struct stat st;
  if (fstatat(sub, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
    const struct timespec now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    utimensat(sub, name.c_str(), now, AT_SYMLINK_NOFOLLOW);  // used now: evicted last
    ++out->present;
    return {};
  }
  const int from = open(r.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (from < 0) return strerror(errno);
  if (fstat(from, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(from);
    return "not a regular file";
  }
  const std::string tmp = name + ".tmp." + std::to_string(getpid());
  const int to =
      openat(sub, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (to < 0) {
    const std::string why = strerror(errno);
    close(from);
    return why;
  }
  std::string why;
  const bool copied = copy_file(from, to, &why);
  close(from);
  if (close(to) != 0 && copied) why = strerror(errno);
  const std::string sub_path = dir + "/" + profile::hex(r.build_id).substr(0, 2) + "/";
  if (copied && why.empty() && read_elf(sub_path + tmp, 0).build_id != r.build_id)
    why = "the file there is another build now (rebuilt during the run)";
  if (copied && why.empty()) {
    if (renameat2(sub, tmp.c_str(), sub, name.c_str(), RENAME_NOREPLACE) == 0) {
      ++out->stored;
    } else if (errno != EEXIST) {  // EEXIST: another record kept it meanwhile
      why = strerror(errno);
    }
  }
  unlinkat(sub, tmp.c_str(), 0);  // fails (ENOENT) once renamed
  return why;
}

// Removes the files used longest ago until the cache holds at most `limit` bytes; the files of
// `now` (this run's) stay. Temporary files of copies a killed record left go after a day.
void evict(int dirfd, uint64_t limit, const std::set<std::string>& now, KeptObjects* out) {
  struct File {
    struct timespec used;
    uint64_t size;
    std::string sub, name;
  };
  std::vector<File> files;
  uint64_t total = 0;
  const int dup_fd = dup(dirfd);
  DIR* d = dup_fd >= 0 ? fdopendir(dup_fd) : nullptr;
  if (d == nullptr) {
    if (dup_fd >= 0) close(dup_fd);
    return;
  }
  const time_t day_ago = time(nullptr) - 24 * 3600;
  while (dirent* e = readdir(d)) {
    if (strlen(e->d_name) != 2 || !isxdigit(e->d_name[0]) || !isxdigit(e->d_name[1])) continue;
    const int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR* s = sub >= 0 ? fdopendir(sub) : nullptr;
    if (s == nullptr) {
      if (sub >= 0) close(sub);
      continue;
    }
    while (dirent* f = readdir(s)) {
      struct stat st;
      if (f->d_name[0] == '.' || fstatat(sub, f->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(st.st_mode))
        continue;
      if (strstr(f->d_name, ".tmp.") != nullptr) {
        if (st.st_mtime < day_ago) unlinkat(sub, f->d_name, 0);
        continue;
      }
      total += static_cast<uint64_t>(st.st_size);
      const std::string key = std::string(e->d_name) + f->d_name;
      if (now.count(key) == 0)
        files.push_back({st.st_mtim, static_cast<uint64_t>(st.st_size), e->d_name, f->d_name});
    }
    closedir(s);
  }
  closedir(d);
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec
                                          : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const File& f : files) {
    if (total <= limit) break;
    if (unlinkat(dirfd, (f.sub + "/" + f.name).c_str(), 0) == 0) {
      total -= f.size;
      ++out->evicted;
    }
  }
}

}  // namespace

KeptObjects keep_objects(const profile::Profile& p) {
  KeptObjects out;
  const uint64_t limit = limit_bytes();
  const std::string dir = profile::buildid_cache_dir();
  if (limit == 0 || dir.empty()) return out;
  std::set<std::string> ids;  // hex, each object once
  std::vector<const profile::Region*> keep;
  for (const profile::Region& r : p.regions) {
    if (r.empty() || r.build_id.size() < 2 || (r.flags & (SPROF_R_VDSO | SPROF_R_JIT)) != 0 ||
        !profile::buildid_cache_keeps(r.path))
      continue;
    if (ids.insert(profile::hex(r.build_id)).second) keep.push_back(&r);
  }
  if (keep.empty()) return out;
  std::string why;
  const int dirfd = open_cache_dir(dir, &why);
  if (dirfd < 0) {
    out.failed.push_back(why);
    return out;
  }
  for (const profile::Region* r : keep) {
    const std::string h = profile::hex(r->build_id);
    const std::string first = h.substr(0, 2);
    if (mkdirat(dirfd, first.c_str(), 0700) != 0 && errno != EEXIST) {
      out.failed.push_back(r->path + ": " + dir + "/" + first + ": " + strerror(errno));
      continue;
    }
    const int sub = openat(dirfd, first.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      out.failed.push_back(r->path + ": " + dir + "/" + first + ": " + strerror(errno));
      continue;
    }
    if (std::string not_kept = keep_one(dir, sub, h.substr(2), *r, &out); !not_kept.empty())
      out.failed.push_back(r->path + ": " + not_kept);
    close(sub);
  }
  if (out.stored != 0) evict(dirfd, limit, ids, &out);
  close(dirfd);
  return out;
}

void say_not_kept(const KeptObjects& kept, const char* cmd, bool quiet, FILE* log) {
  if (quiet) return;
  for (const std::string& f : kept.failed)
    fprintf(log,
            "sprofil %s: note: not kept in the build-id cache (a rebuild will rename its "
            "samples): %s\n",
            cmd, f.c_str());
}

}  // namespace sprofil::record
