// record's checks before anything runs (src/record/record.hpp), called in the sprofil_record
// library itself rather than through the tool: record::check_command resolves a command like
// execvp and says what stands in its way (found? executable? static? setuid/setgid?), and
// record::is_static_elf tells a statically linked ELF executable from anything else. Over real
// files: /bin/sh, the static test program, files made in a scratch directory, and a setuid or
// setgid program of the system when there is one this user cannot profile.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "../common/process.hpp"
#include "record/record.hpp"
#include "secure_program.hpp"

namespace sprofil::record_test {
namespace {

using record::check_command;
using record::is_static_elf;
using record::Launch;

const std::string kStatic = STATIC_PROG;

class TempDir : public testproc::TempDir {
 public:
  TempDir() : testproc::TempDir("sprofil_check") {}
};

// PATH set to `value` for the scope, then put back as it was.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) {
    if (const char* old = getenv("PATH")) old_ = old;
    setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() {
    if (old_)
      setenv("PATH", old_->c_str(), 1);
    else
      unsetenv("PATH");
  }
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;

 private:
  std::optional<std::string> old_;
};

// Writes `text` to `path` with `mode`.
bool make_file(const std::string& path, const std::string& text, mode_t mode) {
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) return false;
  }
  return chmod(path.c_str(), mode) == 0;
}

// A dynamic program found through PATH: nothing in the way, the path the search found.
TEST(CheckCommand, ShIsFoundOnThePathAndDynamic) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  {
    // The search goes on past a directory without it, as execvp's.
    const ScopedPath path(dir.path() + ":/bin");
    const record::CommandCheck c = check_command("sh");
    EXPECT_EQ(c.launch, Launch::kOk) << c.reason;
    EXPECT_EQ(c.path, "/bin/sh");
    EXPECT_EQ(c.reason, "");
  }
  const record::CommandCheck c = check_command("/bin/sh");
  EXPECT_EQ(c.launch, Launch::kOk) << c.reason;
  EXPECT_EQ(c.path, "/bin/sh");
  EXPECT_FALSE(is_static_elf("/bin/sh"));
}

// Neither on PATH nor at a path: not found (127 in the tool).
TEST(CheckCommand, MissingCommandIsNotFound) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const ScopedPath path(dir.path() + ":/bin:/usr/bin");
  record::CommandCheck c = check_command("sprofil-no-such-command");
  EXPECT_EQ(c.launch, Launch::kNotFound);
  EXPECT_EQ(c.reason, "sprofil-no-such-command: command not found");
  c = check_command(dir / "missing");
  EXPECT_EQ(c.launch, Launch::kNotFound);
  EXPECT_EQ(c.reason, dir / "missing" + ": command not found");
  EXPECT_EQ(check_command("").launch, Launch::kNotFound);
}

// A regular file without execute permission, by path or through PATH, and a directory: not
// executable (126 in the tool). An executable later on PATH wins, as with execvp.
TEST(CheckCommand, NonExecutableFileIsNotExecutable) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string file = dir / "sh";
  ASSERT_TRUE(make_file(file, "#!/bin/sh\nexit 0\n", 0644));
  record::CommandCheck c = check_command(file);
  EXPECT_EQ(c.launch, Launch::kNotExecutable);
  EXPECT_EQ(c.path, file);
  EXPECT_EQ(c.reason, file + ": not executable (" + strerror(EACCES) + ")");
  {
    const ScopedPath path(dir.path());
    c = check_command("sh");
    EXPECT_EQ(c.launch, Launch::kNotExecutable);
    EXPECT_EQ(c.path, file);
  }
  {
    const ScopedPath path(dir.path() + ":/bin");
    c = check_command("sh");
    EXPECT_EQ(c.launch, Launch::kOk) << c.reason;
    EXPECT_EQ(c.path, "/bin/sh");
  }
  c = check_command(dir.path());
  EXPECT_EQ(c.launch, Launch::kNotExecutable);
  EXPECT_EQ(c.reason, dir.path() + ": not executable (a directory)");
}

// The statically linked test program: the preloaded agent cannot enter it.
TEST(CheckCommand, StaticProgramIsRefused) {
  EXPECT_TRUE(is_static_elf(kStatic));
  const record::CommandCheck c = check_command(kStatic);
  EXPECT_EQ(c.launch, Launch::kStatic);
  EXPECT_EQ(c.path, kStatic);
  EXPECT_EQ(c.reason.rfind(kStatic + ": it is statically linked, so ", 0), 0u) << c.reason;
}

// A script runs its interpreter (dynamic): fine to profile, and not a static ELF.
TEST(CheckCommand, ShellScriptIsNotStatic) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string script = dir / "script.sh";
  ASSERT_TRUE(make_file(script, "#!/bin/sh\nexit 0\n", 0755));
  EXPECT_FALSE(is_static_elf(script));
  const record::CommandCheck c = check_command(script);
  EXPECT_EQ(c.launch, Launch::kOk) << c.reason;
  EXPECT_EQ(c.path, script);
}

// What is not a readable ELF executable is never called static: a missing file, a
// directory, an empty file, a file cut inside the ELF header.
TEST(IsStaticElf, FalseForWhatCannotBeRead) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_FALSE(is_static_elf(dir / "missing"));
  EXPECT_FALSE(is_static_elf("/nonexistent/sprofil/prog"));
  EXPECT_FALSE(is_static_elf(dir.path()));
  ASSERT_TRUE(make_file(dir / "empty", "", 0755));
  EXPECT_FALSE(is_static_elf(dir / "empty"));
  std::string head;
  {
    std::ifstream f(kStatic, std::ios::binary);
    head.resize(24);
    ASSERT_TRUE(f.read(head.data(), static_cast<std::streamsize>(head.size())));
  }
  ASSERT_TRUE(make_file(dir / "cut", head, 0755));
  EXPECT_FALSE(is_static_elf(dir / "cut"));
}

// A setuid (or setgid) program owned by another user (group): the loader ignores LD_PRELOAD.
// One of the system's own (secure_program.hpp).
TEST(CheckCommand, SetuidOrSetgidProgramIsSecure) {
  const std::string found = secure_program();
  if (found.empty()) GTEST_SKIP() << "no setuid or setgid program of another user or group";
  const record::CommandCheck c = check_command(found);
  EXPECT_EQ(c.launch, Launch::kSecure) << found << ": " << c.reason;
  EXPECT_EQ(c.path, found);
  EXPECT_EQ(c.reason.rfind(found + ": it is " + secure_kind(found) + ", and ", 0), 0u) << c.reason;
  EXPECT_NE(c.reason.find("LD_PRELOAD"), std::string::npos) << c.reason;
}

}  // namespace
}  // namespace sprofil::record_test
