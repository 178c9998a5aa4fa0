// seccomp_launcher ERRNO CMD ARGS...: runs CMD with perf_event_open failing with ERRNO (a
// number) through a seccomp-bpf filter (inherited by every descendant), as on a host whose
// policy denies perf events.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#define AGENT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AGENT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_launcher: add this architecture's AUDIT_ARCH"
#endif

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: seccomp_launcher ERRNO CMD ARGS...\n");
    return 2;
  }
  const unsigned err = static_cast<unsigned>(atoi(argv[1]));
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AGENT_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    perror("seccomp_launcher: seccomp");
    return 125;
  }
  execvp(argv[2], argv + 2);
  perror("seccomp_launcher: execvp");
  return 127;
}
