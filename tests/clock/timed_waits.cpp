// timed_waits: 36 rounds of each wait that a handled signal ends with EINTR whatever SA_RESTART
// says (signal(7)), each after 2 ms of CPU: pause (ended by its own SIGUSR1 timer, every 1 ms),
// sigtimedwait, semtimedop, msgrcv (a thread sends 1 ms after it is told the wait begins),
// epoll_pwait2, thrd_sleep, and on sockets with 1 ms timeouts read, recv, recvfrom, recvmsg,
// accept (SO_RCVTIMEO) and send and write into a full buffer (SO_SNDTIMEO). Built with
// _FORTIFY_SOURCE=2: in odd rounds read, recv and recvfrom are glibc's __read_chk, __recv_chk
// and __recvfrom_chk (a size the compiler cannot see). Prints "eintr N" and the calls that saw
// EINTR (or a pause that ended without its signal); then "wrong N" for waits that ended otherwise
// than natively (they must time out, or get their message or signal). Natively: "eintr 0" and
// "wrong 0".
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

namespace {

double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void burn() {
  volatile double x = 1;
  const double t0 = thread_cpu();
  while (thread_cpu() - t0 < 0.002) x = x * 1.0000001;
}

volatile sig_atomic_t g_usr1 = 0;
volatile size_t g_size = 16;  // a size the compiler cannot see: __read_chk and __recv_chk
void on_usr1(int) {
  g_usr1 = 1;
}

struct MsgBuf {
  long type;
  char text[8];
};

int g_queue = -1;
int g_go[2] = {-1, -1};  // main -> sender: "the wait begins"

void* sender(void*) {
  char c;
  while (read(g_go[0], &c, 1) == 1) {
    const timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
    MsgBuf m{1, "m"};
    msgsnd(g_queue, &m, sizeof m.text, 0);
  }
  return nullptr;
}

void timeout(int fd, int option) {
  const timeval tv{0, 1000};
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

}  // namespace

int main() {
  signal(SIGUSR1, on_usr1);
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigprocmask(SIG_BLOCK, &usr2, nullptr);

  timer_t timer;
  sigevent ev{};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGUSR1;
  const int sem = semget(IPC_PRIVATE, 1, 0600);
  g_queue = msgget(IPC_PRIVATE, 0600);
  const int ep = epoll_create1(0);
  int rx[2], tx[2];
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;  // an abstract name: nothing in the file system
  snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "timed_waits.%d", getpid());
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0 || sem < 0 || g_queue < 0 || ep < 0 ||
      socketpair(AF_UNIX, SOCK_STREAM, 0, rx) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM, 0, tx) != 0 || listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 1) != 0 || pipe(g_go) != 0) {
    perror("set-up");
    return 2;
  }
  timeout(rx[0], SO_RCVTIMEO);
  timeout(listener, SO_RCVTIMEO);
  timeout(tx[0], SO_SNDTIMEO);
  const int small = 4096;
  setsockopt(tx[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  char fill[4096] = {};
  while (send(tx[0], fill, sizeof fill, MSG_DONTWAIT) > 0) {
  }
  pthread_t thread;
  pthread_create(&thread, nullptr, sender, nullptr);

  std::map<std::string, int> eintr;
  int wrong = 0;
  const timespec ms{0, 1000000};
  for (int round = 0; round < 36; ++round) {
    for (int call = 0; call < 12; ++call) {
      burn();
      char buf[16];
      const size_t n = round % 2 ? g_size : sizeof buf;  // the _chk forms, then the plain ones
      long rc = 0;
      bool timed_out = true;  // what the call does natively: time out (EAGAIN, 0 or -1)
      std::string name;
      errno = EBADF;  // a stale error of the program's, which the interposers must not read
      switch (call) {
        case 0: {
          name = "pause";
          g_usr1 = 0;
          // Every 1 ms: a signal that comes before pause begins does not leave it waiting.
          const itimerspec every{{0, 1000000}, {0, 1000000}};
          const itimerspec off{};
          timer_settime(timer, 0, &every, nullptr);
          rc = pause();
          if (!g_usr1) ++eintr[name];  // ended by a signal that is not the program's
          while (!g_usr1) pause();
          timer_settime(timer, 0, &off, nullptr);
          continue;
        }
        case 1:
          name = "sigtimedwait";
          rc = sigtimedwait(&usr2, nullptr, &ms);
          break;
        case 2: {
          name = "semtimedop";
          sembuf down{0, -1, 0};
          rc = semtimedop(sem, &down, 1, &ms);
          break;
        }
        case 3: {
          name = "msgrcv";
          MsgBuf m{};
          if (write(g_go[1], "g", 1) != 1) return 2;
          rc = msgrcv(g_queue, &m, sizeof m.text, 0, 0);
          timed_out = false;
          if (rc < 0 && errno == EINTR) {  // the message still comes: take it
            ++eintr[name];
            if (msgrcv(g_queue, &m, sizeof m.text, 0, 0) < 0) ++wrong;
            continue;
          }
          if (rc != static_cast<long>(sizeof m.text)) ++wrong;
          continue;
        }
        case 4: {
          name = "epoll_pwait2";
          epoll_event e;
          rc = epoll_pwait2(ep, &e, 1, &ms, nullptr);
          if (rc == 0) continue;
          break;
        }
        case 5:
          name = "thrd_sleep";
          rc = thrd_sleep(&ms, nullptr);
          if (rc == 0) continue;
          if (rc == -1) errno = EINTR;  // C11: -1 when a signal ended it
          break;
        case 6:
          name = "read";
          rc = read(rx[0], buf, n);
          break;
        case 7:
          name = "recv";
          rc = recv(rx[0], buf, n, 0);
          break;
        case 8:
          name = "recvfrom";
          rc = recvfrom(rx[0], buf, n, 0, nullptr, nullptr);
          break;
        case 9: {
          name = "recvmsg";
          iovec iov{buf, sizeof buf};
          msghdr msg{};
          msg.msg_iov = &iov;
          msg.msg_iovlen = 1;
          rc = recvmsg(rx[0], &msg, 0);
          break;
        }
        case 10:
          name = "accept";
          rc = accept(listener, nullptr, nullptr);
          break;
        default:
          name = round % 2 ? "write" : "send";
          rc = round % 2 ? write(tx[0], fill, 1) : send(tx[0], fill, 1, 0);
          break;
      }
      if (rc < 0 && errno == EINTR && timed_out)
        ++eintr[name];
      else if (timed_out && !(rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
        ++wrong;
    }
  }
  close(g_go[1]);
  pthread_join(thread, nullptr);
  semctl(sem, 0, IPC_RMID);
  msgctl(g_queue, IPC_RMID, nullptr);

  int total = 0;
  std::string which;
  for (const auto& [name, n] : eintr) {
    total += n;
    which += " " + name + ":" + std::to_string(n);
  }
  printf("eintr %d%s\nwrong %d\n", total, which.c_str(), wrong);
  return 0;
}
