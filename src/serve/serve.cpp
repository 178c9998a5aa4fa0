// The HTTP side of `sprofil serve` (cpp-httplib): routing, the bearer token, argument checks,
// the scrape window, and the answers in the forms Go's net/http/pprof gives them.
#include "serve/serve.hpp"

#include <httplib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "report/report.hpp"
#include "symbolize/symbolize.hpp"
#include "util/clock_ns.hpp"

namespace sprofil::serve {

using profile::Profile;
using profile::Region;

namespace {

uint64_t now_ns() {
  return util::clock_ns(CLOCK_REALTIME);
}

// Go's serveError: plain text, X-Go-Pprof, no Content-Disposition.
void error_reply(httplib::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_header("X-Go-Pprof", "1");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(text + "\n", "text/plain; charset=utf-8");
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Constant-time comparison of the presented token with ours.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0;
}

// The digits of a pid in a path, or -1.
int32_t parse_pid(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  int32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v > 0 ? v : -1;
}

// The CPU time (user + system, every thread) /proc/PID/stat gives a process; 0 if unknown.
uint64_t proc_cpu_ns(int32_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');  // the command may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream in(stat.substr(paren + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // After the command: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? (utime + stime) * (1000000000ull / uint64_t(hz)) : 0;
}

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

struct Server::Impl {
  Options opts;
  Source& source;
  httplib::Server http;
  int port = 0;
  std::atomic<bool> stopping{false};

  Impl(Options o, Source& s) : opts(std::move(o)), source(s) {}

  bool selected(int32_t pid) const {
    return opts.pids.empty() ||
           std::find(opts.pids.begin(), opts.pids.end(), pid) != opts.pids.end();
  }

  std::vector<Target> targets() {
    std::vector<Target> out;
    for (Target& t : source.targets())
      if (selected(t.pid)) out.push_back(std::move(t));
    return out;
  }

  // seconds= of a profile request: default when absent; an error text when not 1..max.
  bool parse_seconds(const httplib::Request& req, int* out, std::string* problem) const {
    if (!req.has_param("seconds")) {
      *out = opts.default_seconds;
      return true;
    }
    const std::string s = req.get_param_value("seconds");
    int v = 0;
    bool digits = !s.empty() && s.size() <= 9;
    for (char c : s) digits = digits && c >= '0' && c <= '9';
    if (digits) v = std::stoi(s);
    if (!digits || v < 1 || v > opts.max_seconds) {
      *problem = "bad seconds: \"" + s.substr(0, 32) + "\": a whole number of seconds from 1 to " +
                 std::to_string(opts.max_seconds);
      return false;
    }
    *out = v;
    return true;
  }

  // The CPU profile of `pids` over the next `seconds`: per process, the delta of a snapshot
  // now and one at the end. Snapshots are also taken every second meanwhile, so that a process
  // that exits during the window still gives its samples up to (about a second before) its end;
  // when every process has ended the answer comes then, without waiting for the window's end.
  void profile(const std::vector<int32_t>& pids, int seconds, httplib::Response& res) {
    struct Track {
      int32_t pid = 0;
      Profile first, last;
      bool ok = false, ended = false;
      std::string why;
    };
    std::vector<Track> tracks(pids.size());
    std::string problem;
    const uint64_t t0 = now_ns();
    for (size_t i = 0; i < pids.size(); ++i) {
      Track& t = tracks[i];
      t.pid = pids[i];
      bool exited = false;
      t.ok = source.snapshot(t.pid, &t.first, &exited, &t.why) && !exited;
      if (!t.ok) problem += "process " + std::to_string(t.pid) + ": " + t.why + "; ";
      t.last = t.first;
    }
    if (std::none_of(tracks.begin(), tracks.end(), [](const Track& t) { return t.ok; })) {
      error_reply(res, 404, problem.empty() ? "no profiled process to look at" : problem);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::seconds(seconds);
    auto next_poll = start + std::chrono::seconds(1);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      const bool final = now >= end || stopping.load();
      if (final || now >= next_poll) {
        for (Track& t : tracks) {
          if (!t.ok || t.ended) continue;
          Profile p;
          bool exited = false;
          std::string error;
          if (source.snapshot(t.pid, &p, &exited, &error)) {
            t.last = std::move(p);
            t.ended = exited;
          } else {
            t.ended = true;  // gone: its last snapshot stands
            t.why = error;
          }
        }
        next_poll = now + std::chrono::seconds(1);
      }
      // Every process has ended: nothing more will come, answer now rather than at the end.
      const bool all_ended = std::all_of(tracks.begin(), tracks.end(),
                                         [](const Track& t) { return !t.ok || t.ended; });
      if (final || all_ended) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::vector<Profile> parts;
    std::vector<std::string> names;
    std::string notes;
    for (Track& t : tracks) {
      if (!t.ok) continue;
      if (t.ended)
        notes += "process " + std::to_string(t.pid) + " ended during the window (" +
                 (t.why.empty() ? std::string("exited") : t.why) +
                 "): its samples up to its last snapshot; ";
      parts.push_back(profile::delta(t.first, t.last));
      names.push_back("." + std::to_string(t.pid));
    }
    Profile p = parts.size() == 1 ? std::move(parts.front())
                                  : profile::combine_processes(std::move(parts), names);
    p.start_ns = t0;
    p.end_ns = now_ns();
    symbolize::Symbolizer symbolizer;
    const std::string body = report::pprof_bytes(p, symbolizer);
    if (body.empty()) {
      error_reply(res, 500, "cannot encode the profile");
      return;
    }
    if (!notes.empty()) res.set_header("X-Sprofil-Note", notes);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Disposition", "attachment; filename=\"profile\"");
    res.set_content(body, "application/octet-stream");
  }

  // pprof's remote symbolization: GET tells that symbols are available; POST (or GET with a
  // query) takes addresses joined by '+' and answers "0xADDR name" per address it can name.
  void symbol(const std::vector<int32_t>& pids, const httplib::Request& req,
              httplib::Response& res) {
    std::string query = req.method == "POST" ? req.body : std::string();
    if (query.empty()) {
      const size_t q = req.target.find('?');
      if (q != std::string::npos) query = req.target.substr(q + 1);
    }
    if (query.empty()) {
      res.set_content("num_symbols: 1\n", "text/plain; charset=utf-8");
      return;
    }
    std::vector<Profile> snaps;
    for (int32_t pid : pids) {
      Profile p;
      bool exited = false;
      std::string error;
      if (source.snapshot(pid, &p, &exited, &error)) snaps.push_back(std::move(p));
    }
    symbolize::Symbolizer symbolizer;
    std::ostringstream out;
    std::istringstream in(query);
    size_t n = 0;
    for (std::string word; std::getline(in, word, '+') && n < 100000; ++n) {
      uint64_t addr = 0;
      if (std::sscanf(word.c_str(), "%" SCNx64, &addr) != 1) continue;
      for (const Profile& p : snaps) {
        const Region* hit = nullptr;
        for (const Region& r : p.regions)
          if (addr >= r.start && addr < r.end) hit = &r;
        if (hit == nullptr) continue;
        const symbolize::Symbol* s =
            symbolizer.open(hit->path, hit->build_id)->function_at(addr - hit->load_bias);
        if (s != nullptr) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%#" PRIx64 " ", addr);
          out << buf << s->name << "\n";
          break;
        }
      }
    }
    res.set_content(out.str(), "text/plain; charset=utf-8");
  }

  void metrics(httplib::Response& res) {
    std::ostringstream m;
    m << "# HELP sprofil_samples_total Samples counted into the histograms.\n"
         "# TYPE sprofil_samples_total counter\n";
    std::ostringstream lost, delivered, rate, cpu;
    lost << "# HELP sprofil_lost_samples_total Samples delivered but not counted.\n"
            "# TYPE sprofil_lost_samples_total counter\n";
    delivered << "# HELP sprofil_delivered_samples_total Samples delivered to the profiler.\n"
                 "# TYPE sprofil_delivered_samples_total counter\n";
    rate << "# HELP sprofil_effective_hz Delivered samples per CPU-second of the process.\n"
            "# TYPE sprofil_effective_hz gauge\n";
    cpu << "# HELP sprofil_requested_hz Samples per second requested.\n"
           "# TYPE sprofil_requested_hz gauge\n";
    for (const Target& t : targets()) {
      Profile p;
      bool exited = false;
      std::string error;
      if (!source.snapshot(t.pid, &p, &exited, &error)) continue;
      const std::string labels =
          "{pid=\"" + std::to_string(t.pid) + "\",comm=\"" + label_value(t.comm) + "\"} ";
      m << "sprofil_samples_total" << labels << p.counted() << "\n";
      lost << "sprofil_lost_samples_total" << labels << p.lost << "\n";
      delivered << "sprofil_delivered_samples_total" << labels << p.delivered << "\n";
      // A running program's snapshot has no CPU time yet (it is written at exit): take the
      // process's from /proc then.
      const uint64_t cpu_ns = p.cpu_ns > 0 ? p.cpu_ns : proc_cpu_ns(t.pid);
      const double hz = cpu_ns > 0 ? double(p.delivered) / (double(cpu_ns) / 1e9) : p.effective_hz;
      rate << "sprofil_effective_hz" << labels << hz << "\n";
      cpu << "sprofil_requested_hz" << labels << p.requested_hz << "\n";
    }
    res.set_content(m.str() + lost.str() + delivered.str() + rate.str() + cpu.str(),
                    "text/plain; version=0.0.4; charset=utf-8");
  }

  void index(httplib::Response& res) {
    std::ostringstream h;
    h << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>sprofil serve</title></head>"
         "<body><h1>sprofil serve</h1><p>Profiled processes of this user:</p><table>"
         "<tr><th>pid</th><th>command</th><th>CPU profile</th></tr>";
    for (const Target& t : targets()) {
      const std::string base = "/pid/" + std::to_string(t.pid) + "/debug/pprof/";
      h << "<tr><td>" << t.pid << "</td><td>" << html_escape(t.comm) << "</td><td><a href=\""
        << base << "\">" << base << "</a></td></tr>";
    }
    h << "</table><p><a href=\"/debug/pprof/\">/debug/pprof/</a> (every process above) &middot; "
         "<a href=\"/metrics\">/metrics</a></p></body></html>";
    res.set_content(h.str(), "text/html; charset=utf-8");
  }

  static void pprof_index(httplib::Response& res) {
    res.set_content(
        "<!DOCTYPE html><html><head><title>/debug/pprof/</title></head><body>"
        "<p>Types of profiles available:</p><table>"
        "<tr><td><a href=\"profile?seconds=30\">profile</a></td><td>CPU profile: the samples "
        "of the next `seconds` (default 30)</td></tr>"
        "<tr><td><a href=\"symbol\">symbol</a></td><td>address to function name</td></tr>"
        "</table></body></html>",
        "text/html; charset=utf-8");
  }

  // The processes a path names: /pid/N/... one (refused unless it is a target), else all.
  bool pids_of(const httplib::Request& req, std::vector<int32_t>* out, httplib::Response& res) {
    std::vector<Target> ts = targets();
    if (req.matches.size() > 1) {
      const int32_t pid = parse_pid(req.matches[1]);
      const bool known =
          std::any_of(ts.begin(), ts.end(), [&](const Target& t) { return t.pid == pid; });
      if (!known) {
        error_reply(res, 404,
                    "process " + std::string(req.matches[1]).substr(0, 16) +
                        " is not a profiled process of this user that sprofil serve can look at");
        return false;
      }
      out->push_back(pid);
      return true;
    }
    for (const Target& t : ts) out->push_back(t.pid);
    if (out->empty()) {
      error_reply(res, 404, "no profiled process of this user to look at");
      return false;
    }
    return true;
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opts.token.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0 && same_token(auth.substr(7), opts.token))
        return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("WWW-Authenticate", "Bearer");
      error_reply(res, 401, "a bearer token is required (Authorization: Bearer ...)");
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      if (opts.log) opts.log(req.method, req.path, res.status);
    });
    http.Get("/", [this](const httplib::Request&, httplib::Response& res) { index(res); });
    for (const char* base : {"/debug/pprof/", R"(/pid/(\d+)/debug/pprof/)"}) {
      const std::string b = base;
      http.Get(b, [this](const httplib::Request& req, httplib::Response& res) {
        std::vector<int32_t> pids;
        if (pids_of(req, &pids, res)) pprof_index(res);
      });
      http.Get(b + "profile", [this](const httplib::Request& req, httplib::Response& res) {
        int seconds = 0;
        std::string problem;
        if (!parse_seconds(req, &seconds, &problem)) return error_reply(res, 400, problem);
        std::vector<int32_t> pids;
        if (pids_of(req, &pids, res)) profile(pids, seconds, res);
      });
      auto sym = [this](const httplib::Request& req, httplib::Response& res) {
        std::vector<int32_t> pids;
        if (pids_of(req, &pids, res)) symbol(pids, req, res);
      };
      http.Get(b + "symbol", sym);
      http.Post(b + "symbol", sym);
    }
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own error
      if (res.status == 404)
        error_reply(res, 404,
                    "unknown path " + req.path.substr(0, 128) +
                        " (try /, /debug/pprof/, /debug/pprof/profile?seconds=N, /metrics)");
      else
        error_reply(res, res.status, "bad request");
    });
  }
};

Server::Server(Options options, Source& source)
    : impl_(std::make_unique<Impl>(std::move(options), source)) {}

Server::~Server() {
  stop();
}

bool Server::bind(std::string* error) {
  Impl& s = *impl_;
  if (!is_loopback(s.opts.host) && s.opts.token.empty()) {
    *error = "listening on " + s.opts.host +
             " (not loopback) needs --token-file: anyone who can reach it could read the "
             "profiles";
    return false;
  }
  const int threads = s.opts.threads;
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  s.http.set_payload_max_length(1 << 20);
  s.http.set_read_timeout(10, 0);
  s.http.set_write_timeout(30, 0);
  s.routes();
  const std::string host = s.opts.host == "localhost" ? "127.0.0.1" : s.opts.host;
  if (s.opts.port == 0) {
    s.port = s.http.bind_to_any_port(host);
  } else {
    s.port = s.http.bind_to_port(host, s.opts.port) ? s.opts.port : -1;
  }
  if (s.port <= 0) {
    *error = "cannot listen on " + s.opts.host + ":" + std::to_string(s.opts.port) +
             " (address in use, or not an address of this machine)";
    return false;
  }
  return true;
}

int Server::port() const {
  return impl_->port;
}

void Server::run() {
  impl_->http.listen_after_bind();
}

void Server::stop() {
  impl_->stopping.store(true);
  impl_->http.stop();
}

}  // namespace sprofil::serve
