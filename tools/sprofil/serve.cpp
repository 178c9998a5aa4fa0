// sprofil serve [--listen HOST:PORT] [--token-file F] [PID ...]: the pprof HTTP endpoint over
// this user's profiled processes (src/serve). Runs until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "report/labels.hpp"
#include "serve/serve.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

namespace {

struct ServeOptions {
  std::string listen = "127.0.0.1:6060";
  std::string token_file;
  std::vector<int32_t> pids;
  bool quiet = false;
};

// HOST:PORT, [V6]:PORT or PORT.
bool split_listen(const std::string& s, std::string* host, int* port) {
  size_t colon = s.rfind(':');
  std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  *host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
  if (host->size() > 1 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "0.0.0.0";
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *port = std::stoi(p);
  return *port <= 65535;
}

int run_serve(const ServeOptions& o) {
  serve::Options so;
  if (!split_listen(o.listen, &so.host, &so.port))
    return usage_error(
        "serve", "--listen " + o.listen + ": expected HOST:PORT (for example 127.0.0.1:6060)");
  if (!o.token_file.empty()) {
    std::ifstream f(o.token_file);
    if (!f) return fail("serve", o.token_file + ": cannot read the token file");
    std::getline(f, so.token);
    while (!so.token.empty() && (so.token.back() == '\r' || so.token.back() == ' '))
      so.token.pop_back();
    if (so.token.size() < 16)
      return fail("serve",
                  o.token_file + ": the token must be at least 16 characters on its first line");
  }
  so.pids = o.pids;
  if (!o.quiet)
    so.log = [](const std::string& method, const std::string& path, int status) {
      // A client's request line, which the client chose: printable, so that it cannot reach the
      // terminal's control sequences.
      std::fprintf(stderr, "sprofil serve: %s %s -> %d\n", report::printable(method).c_str(),
                   report::printable(path).c_str(), status);
    };
  std::unique_ptr<serve::Source> source = serve::live_source();
  serve::Server server(so, *source);
  std::string error;
  if (!server.bind(&error)) return fail("serve", error);
  // SIGINT and SIGTERM end the server: a thread waits for them (blocked in every thread).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    server.stop();
  });
  std::fprintf(
      stderr, "sprofil serve: listening on http://%s:%d/ (%s)\n",
      so.host.find(':') != std::string::npos ? ("[" + so.host + "]").c_str() : so.host.c_str(),
      server.port(), so.token.empty() ? "no token" : "bearer token required");
  server.run();
  // run() returns after stop(); wake the waiter if it is still waiting.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}

}  // namespace

Run setup_serve(CLI::App& sub) {
  auto opt = std::make_shared<ServeOptions>();
  sub.add_option("--listen", opt->listen,
                 "Address to listen on (default 127.0.0.1:6060). Any address other than loopback "
                 "requires --token-file")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            std::string host;
            int port = 0;
            return split_listen(value, &host, &port)
                       ? ""
                       : value +
                             ": expected HOST:PORT, PORT from 0 to 65535 (for example "
                             "127.0.0.1:6060)";
          },
          "HOST:PORT"));
  sub.add_option("--token-file", opt->token_file,
                 "File whose first line is a bearer token every request must carry "
                 "(Authorization: Bearer TOKEN); required off loopback");
  sub.add_flag("-q,--quiet", opt->quiet, "Do not log each request");
  sub.add_option("pids", opt->pids, "Serve only these processes (default: every one of yours)")
      ->transform(whole_number<int32_t>(1));
  return [opt] { return run_serve(*opt); };
}

}  // namespace sprofil::tool
