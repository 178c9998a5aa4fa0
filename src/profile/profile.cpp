#include "profile/profile.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>

#include "format/layout.hpp"
#include "util/count_of.hpp"

namespace sprofil::profile {

namespace {
struct ClockInfo {
  const char* name;
  const char* description;
  bool off_cpu;
};
#define SPROF_CLOCK_INFO_(NAME, id, name, description, off_cpu) {name, description, off_cpu != 0},
constexpr ClockInfo kClocks[] = {SPROF_CLOCKS(SPROF_CLOCK_INFO_)};
#undef SPROF_CLOCK_INFO_
// Each row of SPROF_CLOCKS, by its NAME, and its enumerator: a row without its line here does
// not compile, nor does an enumerator whose row is gone.
constexpr Clock kClock_CPU = Clock::kCpu;
constexpr Clock kClock_ITIMER = Clock::kItimer;
constexpr Clock kClock_PERF = Clock::kPerf;
constexpr Clock kClock_WALL = Clock::kWall;
constexpr Clock kClock_SAMPLER = Clock::kSampler;
#define SPROF_CLOCK_PIN_(NAME, id, name, description, off_cpu) \
  static_assert(uint32_t(kClock_##NAME) == SPROF_CLOCK_##NAME, \
                "profile::Clock follows SPROF_CLOCKS: " name);
SPROF_CLOCKS(SPROF_CLOCK_PIN_)
#undef SPROF_CLOCK_PIN_
}  // namespace

const char* clock_name(Clock c) {
  return uint32_t(c) < SPROF_CLOCK_COUNT ? kClocks[uint32_t(c)].name : "unknown";
}

const char* clock_description(Clock c) {
  return uint32_t(c) < SPROF_CLOCK_COUNT ? kClocks[uint32_t(c)].description : "unknown clock";
}

bool counts_off_cpu(Clock c) {
  return uint32_t(c) < SPROF_CLOCK_COUNT && kClocks[uint32_t(c)].off_cpu;
}

const char* clock_measure(Clock c) {
  return counts_off_cpu(c) ? "thread time on and off the CPU" : "CPU time";
}

uint64_t Region::nbins() const {
  return start < end ? layout::nbins_for(end - start, bin_size) : 0;
}

void Region::add(uint64_t index, uint64_t count, uint64_t system) {
  if (count == 0 && system == 0) return;
  auto it = bins.end();
  if (!bins.empty() && bins.back().index >= index)
    it = std::lower_bound(bins.begin(), bins.end(), index,
                          [](const Bin& b, uint64_t i) { return b.index < i; });
  if (it == bins.end() || it->index != index) it = bins.insert(it, Bin{index, 0, 0});
  it->count = sat_add(it->count, count);
  it->system = std::min(sat_add(it->system, system), it->count);
  if (it->count == 0) bins.erase(it);
}

namespace {
const Region::Bin* find_bin(const std::vector<Region::Bin>& bins, uint64_t index) {
  auto it = std::lower_bound(bins.begin(), bins.end(), index,
                             [](const Region::Bin& b, uint64_t i) { return b.index < i; });
  return it != bins.end() && it->index == index ? &*it : nullptr;
}
}  // namespace

void Region::subtract(const Region& o) {
  std::vector<Bin> out;
  out.reserve(bins.size());
  size_t j = 0;
  for (const Bin& b : bins) {
    while (j < o.bins.size() && o.bins[j].index < b.index) ++j;
    Bin d = b;
    if (j < o.bins.size() && o.bins[j].index == b.index) {
      d.count = b.count > o.bins[j].count ? b.count - o.bins[j].count : 0;
      d.system = b.system > o.bins[j].system ? b.system - o.bins[j].system : 0;
      d.system = std::min(d.system, d.count);
    }
    if (d.count != 0) out.push_back(d);
  }
  bins = std::move(out);
}

uint64_t Region::count_at(uint64_t index) const {
  const Bin* b = find_bin(bins, index);
  return b ? b->count : 0;
}

uint64_t Region::system_at(uint64_t index) const {
  const Bin* b = find_bin(bins, index);
  return b ? b->system : 0;
}

uint64_t Region::max_count() const {
  uint64_t m = 0;
  for (const Bin& b : bins) m = std::max(m, b.count);
  return m;
}

uint64_t Region::total() const {
  uint64_t t = 0;
  for (const Bin& b : bins) t = sat_add(t, b.count);
  return t;
}

uint64_t Region::system_total() const {
  uint64_t t = 0;
  for (const Bin& b : bins) t = sat_add(t, b.system);
  return t;
}

bool Region::has_system() const {
  return (flags & SPROF_R_SYSTEM) != 0;
}

bool Profile::finished() const {
  return (flags & SPROF_F_FINISHED) != 0;
}

uint64_t Profile::total_samples() const {
  uint64_t t = overflow;
  for (const Region& r : regions) t = sat_add(t, r.total());
  return t;
}

bool Profile::has_system() const {
  for (const Region& r : regions)
    if (r.has_system()) return true;
  return false;
}

uint64_t Profile::system_samples() const {
  uint64_t t = 0;
  for (const Region& r : regions) t = sat_add(t, r.system_total());
  return t;
}

std::string comm_of(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  std::string c = argv[0];
  if (const size_t slash = c.rfind('/'); slash != std::string::npos) c.erase(0, slash + 1);
  if (c.size() > 15) c.resize(15);
  return c;
}

Process process_of(const Profile& p) {
  Process pr;
  pr.pid = p.pid;
  pr.ppid = p.ppid;
  pr.comm = p.comm.empty() ? comm_of(p.argv) : p.comm;
  pr.argv = p.argv;
  pr.flags = p.flags;
  pr.clock = p.clock;
  pr.requested_hz = p.requested_hz;
  pr.tick_ns = p.tick_ns;
  pr.effective_hz = p.effective_hz;
  pr.start_ns = p.start_ns;
  pr.end_ns = p.end_ns;
  pr.cpu_ns = p.cpu_ns;
  pr.overflow = p.overflow;
  pr.delivered = p.delivered;
  pr.lost = p.lost;
  return pr;
}

void set_header(Profile* p, const Process& pr) {
  p->version = SPROF_VERSION;
  p->flags = pr.flags;
  p->clock = pr.clock;
  p->requested_hz = pr.requested_hz;
  p->tick_ns = pr.tick_ns;
  p->effective_hz = pr.effective_hz;
  p->start_ns = pr.start_ns;
  p->end_ns = pr.end_ns;
  p->cpu_ns = pr.cpu_ns;
  p->pid = pr.pid;
  p->ppid = pr.ppid;
  p->argv = pr.argv;
  p->comm = pr.comm == comm_of(pr.argv) ? std::string() : pr.comm;
  p->overflow = pr.overflow;
  p->delivered = pr.delivered;
  p->lost = pr.lost;
}

std::vector<Profile> process_images(const Profile& p) {
  std::vector<Profile> out(p.processes.size());
  for (size_t i = 0; i < out.size(); ++i) {
    set_header(&out[i], p.processes[i]);
    out[i].processes.push_back(p.processes[i]);
  }
  for (const Region& r : p.regions) {
    Profile& im = out.at(r.process);
    im.regions.push_back(r);
    im.regions.back().process = 0;
  }
  return out;
}

Profile process_image(const Profile& p, size_t process) {
  return std::move(process_images(p).at(process));
}

Profile combine_processes(std::vector<Profile> parts, const std::vector<std::string>& names) {
  Profile out;
  out.run = true;
  TallySum sum;
  for (size_t i = 0; i < parts.size(); ++i) {
    Profile& q = parts[i];
    Process pr = process_of(q);
    pr.name = i < names.size() ? names[i] : "";
    if (i == 0) {
      set_header(&out, pr);  // the root's; the tallies and times are the sum's (below)
      out.flags &= ~SPROF_F_FINISHED;
    }
    sum.add(q);
    for (Region& r : q.regions) {
      r.process = static_cast<uint32_t>(out.processes.size());
      out.regions.push_back(std::move(r));
    }
    out.processes.push_back(std::move(pr));
  }
  const double single_hz = out.effective_hz;
  sum.store(&out);
  if (parts.size() == 1) out.effective_hz = single_hz;  // one process: its own rate, as written
  return out;
}

void TallySum::add(const Profile& p) {
  finished_ = finished_ && p.finished();
  if (p.start_ns != 0 && (start_ns_ == 0 || p.start_ns < start_ns_)) start_ns_ = p.start_ns;
  if (p.end_ns > end_ns_) end_ns_ = p.end_ns;
  const bool empty = p.cpu_ns == 0 && p.delivered == 0 && p.overflow == 0 && p.lost == 0;
  if (p.cpu_ns == 0 && !empty) cpu_known_ = false;
  cpu_ns_ = sat_add(cpu_ns_, p.cpu_ns);
  if (empty) {
    // no CPU, no rate: nothing to weigh
  } else if (p.effective_hz > 0 && p.cpu_ns > 0) {
    weighted_hz_ += p.effective_hz * static_cast<double>(p.cpu_ns);
    hz_weight_ += static_cast<double>(p.cpu_ns);
  } else {
    hz_known_ = false;
  }
  overflow_ = sat_add(overflow_, p.overflow);
  delivered_ = sat_add(delivered_, p.delivered);
  lost_ = sat_add(lost_, p.lost);
  any_ = true;
}

void TallySum::store(Profile* out) const {
  const bool finished = any_ && finished_;
  out->flags = finished ? (out->flags | SPROF_F_FINISHED) : (out->flags & ~SPROF_F_FINISHED);
  out->start_ns = start_ns_;
  out->end_ns = finished ? end_ns_ : 0;
  out->cpu_ns = cpu_known_ ? cpu_ns_ : 0;
  out->effective_hz = hz_known_ && hz_weight_ > 0 ? weighted_hz_ / hz_weight_ : 0;
  out->overflow = overflow_;
  out->delivered = delivered_;
  out->lost = lost_;
}

uint64_t sampled_ns(const Profile& p) {
  const unsigned __int128 ns = static_cast<unsigned __int128>(p.total_samples()) * p.tick_ns;
  return ns > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(ns);
}

uint64_t unsampled_cpu_ns(const Profile& p) {
  if (p.run_cpu_ns == 0) return 0;
  uint64_t covered = 0;
  if (p.clock == Clock::kWall) {
    for (const Process& pr : p.processes) covered = sat_add(covered, pr.cpu_ns);
  } else {
    covered = sampled_ns(p);
  }
  return p.run_cpu_ns > covered ? p.run_cpu_ns - covered : 0;
}

namespace {

// "" unless `count` tasks' `ticks` (credited without a sample of their own) are a tenth of the
// samples or more, where it matters; else their count and time, "N threads ... their X s".
std::string unsampled_lead(const Profile& p, uint64_t count, uint64_t ticks, const char* one,
                           const char* many) {
  if (count == 0 || ticks == 0 || ticks * 10 < p.total_samples()) return "";
  char s[64];
  std::snprintf(s, sizeof s, "%.3f s", double(ticks) * double(p.tick_ns) / 1e9);
  return util::count_of(count, one, many) + " ended before their first sample (shorter than a " +
         "period): their " + s + " of CPU is at ";
}

}  // namespace

std::string unsampled_threads_note(const Profile& p) {
  std::string lead =
      unsampled_lead(p, p.unsampled_threads, p.unsampled_thread_ticks, "thread", "threads");
  if (lead.empty()) return "";
  return lead +
         "their creators' last pc, as system time, not at their own code; "
         "`sprofil record --agent` samples each thread from its start, or record with a higher "
         "-F";
}

std::string unsampled_processes_note(const Profile& p) {
  std::string lead =
      unsampled_lead(p, p.unsampled_processes, p.unsampled_process_ticks, "process", "processes");
  if (lead.empty()) return "";
  return lead +
         "their programs' entry points (_start), as system time, not at their own code; "
         "record with a higher -F to sample them";
}

std::string unwaited_note(const Profile& p) {
  if (p.run_cpu_ns == 0 || counts_off_cpu(p.clock)) return "";
  const uint64_t sampled = sampled_ns(p);
  const unsigned __int128 bound =
      static_cast<unsigned __int128>(p.run_cpu_ns) + p.run_cpu_ns / 20 + 2 * p.tick_ns;
  if (sampled <= bound) return "";
  char s[320];
  std::snprintf(s, sizeof s,
                "the samples stand for %.3f s of CPU, %.3f s more than the run's %.3f s: the "
                "run's CPU counts each process once its parent has waited for it, and those "
                "still running at the command's end, or left to init (daemons), are in the "
                "samples only",
                double(sampled) / 1e9, double(sampled - p.run_cpu_ns) / 1e9,
                double(p.run_cpu_ns) / 1e9);
  return s;
}

void resolve_paths(Profile* p) {
  std::map<std::string, std::string> resolved;
  for (Region& r : p->regions) {
    if (r.path.empty() || r.path[0] != '/') continue;  // "[vdso]", an anonymous region
    auto [it, inserted] = resolved.emplace(r.path, r.path);
    if (inserted) {
      char buf[PATH_MAX];
      if (realpath(r.path.c_str(), buf) != nullptr) it->second = buf;
    }
    r.path = it->second;
  }
}

Profile delta(const Profile& before, const Profile& after) {
  auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  Profile d = after;
  d.overflow = minus(after.overflow, before.overflow);
  d.delivered = minus(after.delivered, before.delivered);
  d.lost = minus(after.lost, before.lost);
  d.cpu_ns = minus(after.cpu_ns, before.cpu_ns);
  for (Region& r : d.regions)
    for (const Region& o : before.regions)
      if (o.start == r.start && o.end == r.end && o.path == r.path && o.bin_size == r.bin_size &&
          o.process == r.process) {
        r.subtract(o);
        break;
      }
  for (size_t k = 0; k < d.processes.size() && k < before.processes.size(); ++k) {
    Process& p = d.processes[k];
    const Process& b = before.processes[k];
    p.overflow = minus(p.overflow, b.overflow);
    p.delivered = minus(p.delivered, b.delivered);
    p.lost = minus(p.lost, b.lost);
    p.cpu_ns = minus(p.cpu_ns, b.cpu_ns);
  }
  return d;
}

uint32_t counter_width_for(uint64_t max_count) {
  if (max_count <= 0xffffu) return 2;
  if (max_count <= 0xffffffffu) return 4;
  return 8;
}

}  // namespace sprofil::profile
