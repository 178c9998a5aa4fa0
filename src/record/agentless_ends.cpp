// Record's default (agentless_state.hpp): the time that no sample stands for. A throttled
// event's time till its resume counts as lost samples; at the run's end, the periods of the
// events' counters that no sample credited are shared among the threads' ends.
#include "record/agentless_state.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "util/apportion.hpp"
#include "util/clock_ns.hpp"

namespace sprofil::record {

using namespace agentless_impl;

// w periods at the end of a thread's time in image m, system_w of them kernel time, at its
// last pc; where it had none (a thread or process shorter than its first period: an inherited
// event's first period is a whole one), at its program's entry point, as the agent credits a
// thread's start routine; else outside every object.
void Agentless::State::credit_at_end(Img* m, uint64_t pc, uint64_t w, uint64_t system_w) {
  stats.exit_credited += w;
  if (!m) return;
  if (!pc) pc = m->entry_pc;
  if (pc) {
    add(m, pc, w, system_w);
    return;
  }
  m->delivered += w;
  m->periods += w;
  m->overflow += w;
}

void Agentless::State::throttled(const Rec& r) {
  ++stats.throttled;
  const uint64_t id = field<uint64_t>(r.body, 16);
  ran_on(r.ring, id, r.time);
  const size_t ids_at = r.body.size() - kSampleIdBytes;  // sample_id: pid, tid, time, id
  throttled_at[id] = Throttle{r.time, r.ring, img_index(field<uint32_t>(r.body, ids_at)),
                              static_cast<pid_t>(field<uint32_t>(r.body, ids_at + 4))};
}

// Thread tid ended at `time` (tid 0: every thread, the run's end).
void Agentless::State::ended_throttled(pid_t tid, uint64_t time) {
  resume_if([&](uint64_t, const Throttle& t) { return tid == 0 || t.tid == tid; }, time);
}

void Agentless::State::unthrottled(const Rec& r) {
  const auto it = throttled_at.find(field<uint64_t>(r.body, 16));
  if (it == throttled_at.end()) return;
  resumed(it->second, r.time);
  throttled_at.erase(it);
}

// Copy `id` ran on ring's CPU at `time`: the other copies throttled there were switched out.
void Agentless::State::ran_on(uint32_t ring, uint64_t id, uint64_t time) {
  resume_if([&](uint64_t c, const Throttle& t) { return t.ring == ring && c != id; }, time);
}

// The throttled copies for which stop(copy id, its throttle) holds resume at `time`.
template <class Stop>
void Agentless::State::resume_if(Stop stop, uint64_t time) {
  for (auto it = throttled_at.begin(); it != throttled_at.end();)
    if (stop(it->first, it->second)) {
      resumed(it->second, time);
      it = throttled_at.erase(it);
    } else {
      ++it;
    }
}

void Agentless::State::resumed(const Throttle& t, uint64_t time) {
  const uint64_t n = time > t.at ? std::min(time - t.at, tick_ns) / period : 0;
  if (n == 0 || t.img >= imgs.size()) return;
  imgs[t.img].lost += n;
  imgs[t.img].delivered += n;
  imgs[t.img].throttled_lost += n;
  stats.throttled_lost += n;
}

// The periods the images stand for, sampled and lost, are at most the run's CPU (`run_cpu_ns`,
// every process's): what passes it is taken back from the lost periods, in proportion to them
// (util::apportion), the throttled time's first, then the full rings'.
// - The throttled time taken for lost samples (resumed()) ends at the first sign that its
//   thread left the CPU: where other programs took the CPU from it, their time until the next
//   tick is in it too. Four threads throttled on two CPUs beside another program's busy loops
//   counted 113-167% of their CPU as delivered.
// - A full ring's LOST record gives a count of records the kernel could not write, taken for
//   periods of the ring's mean one (lost_periods()). At -F 100000 (a period of 10 us, the
//   task clock's floor) the kernel gave counts of 1 to 36 million in about one run of three
//   (`agent_prog burn 0.3`: 30,000 periods), and the profile stood for 24 s of CPU.
void Agentless::State::bound_lost(uint64_t run_cpu_ns) {
  const uint64_t cap = run_cpu_ns / period;
  // Takes back what passes the cap, at most all of `w` (each image's part of its lost
  // periods), in proportion to it, from each image's lost and delivered periods; the cuts.
  auto take_back = [&](const std::vector<uint64_t>& w) {
    uint64_t total = 0, parts = 0;
    for (size_t i = 0; i < imgs.size(); ++i) {
      total += imgs[i].periods + imgs[i].lost;
      parts += w[i];
    }
    const uint64_t excess = total > cap ? std::min(total - cap, parts) : 0;
    const std::vector<uint64_t> cut = util::apportion(excess, w);
    for (size_t i = 0; i < imgs.size(); ++i) {
      imgs[i].lost -= cut[i];
      imgs[i].delivered -= cut[i];
    }
    return std::pair{cut, excess};
  };
  std::vector<uint64_t> w;
  for (const Img& m : imgs) w.push_back(m.throttled_lost);
  const auto [cut, throttled] = take_back(w);
  for (size_t i = 0; i < imgs.size(); ++i) imgs[i].throttled_lost -= cut[i];
  stats.throttled_lost -= throttled;
  w.clear();
  for (const Img& m : imgs) w.push_back(m.lost - m.throttled_lost);  // the full rings'
  stats.lost_periods -= std::min(stats.lost_periods, take_back(w).second);
}

// A thread's end, two passes after its EXIT record: its weight for the periods that no
// sample credited (run_end), and what record kept of it dropped.
//
// A copy's time since its last sample (and a thread's shorter than its first period: an
// inherited copy starts with a whole period) ends no period. The kernel's record of each
// copy's end (inherit_stat's READ record) is not reliable: it is written from the exiting
// thread's CPU into every CPU's ring, and it loses records. 2,000 threads of 0.5 ms, two at
// a time, lost 5-40% of their FORK, EXIT and READ records in 6 of 8 runs, with no LOST
// record; perf record -s with `-e '{task-clock}:S'` as many; without inherit_stat, or with
// the program pinned to one CPU, every record came (8 of 8, 6 of 6): the writes from
// another CPU look to race with the ring's own CPU's. So the ends are credited together at
// the run's end, from the events' counters (read(2) of an inherited event adds its copies'
// ends): each thread takes a share in proportion to its wall time from its last sample (or
// clone) to its exit, at most a period (a copy's time after its last sample is under a
// period unless it was in the kernel, and a thread that slept before it exited did not run).
void Agentless::State::thread_end(pid_t tid, const Gone& g) {
  const auto o = own_of.find(tid);
  const bool sampled = o != own_of.end();
  if (g.img != ~size_t{0} && imgs[g.img].pid != tid) note_thread_cpu(sampled ? o->second.ns : 0);
  // Its tail is its last own sample's kind of time: a thread computing in user space at its
  // last sample went on there for most of a period before its exit, which takes tens of
  // microseconds (taken for kernel time, 1,500 threads of 0.4 ms had 10-14% of their
  // function's samples as system time where they make no system call).
  const bool user_tail = sampled && o->second.user;
  if (sampled) own_of.erase(o);
  if (const auto ns = last_ns.find(tid); ns != last_ns.end() && g.img != ~size_t{0}) {
    const auto pc = last_pc.find(tid);
    const uint64_t w = g.time > ns->second ? std::min(g.time - ns->second, period) : 0;
    if (w) {
      Tail& e = ends[{g.img, pc != last_pc.end() ? pc->second : 0}];
      e.w += w;
      if (user_tail && pc != last_pc.end()) e.user_w += w;
      // A thread (not a process's first) with no sample of its own: its pc is its creator's.
      if (!sampled && imgs[g.img].pid != tid) {
        e.unsampled_w += w;
        ++stats.unsampled_threads;
      }
      // A process whose program took no sample (no pc since its exec): at its entry point.
      if (pc == last_pc.end() && imgs[g.img].pid == tid && imgs[g.img].entry_pc)
        ++stats.unsampled_processes;
    }
  }
  last_pc.erase(tid);
  execd.erase(tid);
  last_ns.erase(tid);
  born_in.erase(tid);
  if (const auto it = ids_of.find(tid); it != ids_of.end()) {
    for (const uint64_t id : it->second) copies.erase(id);
    ids_of.erase(it);
  }
}

// Once the command's every process ended: the periods of the tracking events' counters (every
// thread's time, read(2) adding the copies' ends; not the two sets', which both count while a
// swap is made: with 16 threads on 2 CPUs, 26-36 ms a run more than the command ran, all of
// it taken for time no sample credited) that no sample credited, shared among the
// threads' ends (thread_end) by largest remainder, each share at its thread's last pc (its
// creator's, or its program's entry point, where it had no sample: credit_at_end).
void Agentless::State::run_end() {
  if (!procs.empty()) return;
  for (auto& [tid, g] : gone_tids) thread_end(tid, g);
  gone_tids.clear();
  uint64_t total = 0, credited = stats.lost_periods + stats.throttled_lost;
  for (const Ring& r : rings) {
    uint64_t v = 0;
    if (::read(r.track, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return;
    total += v;
  }
  // This thread's own time since its originals were enabled is in them too, and the command's
  // before its exec, record's code (sample()).
  const uint64_t own = util::clock_ns(CLOCK_THREAD_CPUTIME_ID) - self_cpu_at + dropped_ns;
  total -= std::min(total, own);
  for (const Img& m : imgs) credited += m.periods;
  const uint64_t target = (total + period / 2) / period;
  if (target <= credited) return;
  uint64_t weight = 0;
  for (const auto& [at, e] : ends) weight += e.w;
  // The ends take at most their tails' time: a thread's CPU time from its last sample to its
  // exit is at most its weight. The rest was counted without a sample anywhere (a timer that
  // fired late, as when the VM did not run, skips the periods it missed; each thread's copies
  // of the set that was off, one a CPU, keep part of a period at its end) and stays unplaced:
  // the summary counts it as CPU with no sample. Crediting it all at the ends once put 52 ms
  // of a 0.6 s single-threaded run at its exit in ld.so. (A throttled event's counter is no measure
  // at all: at kernel.perf_event_max_sample_rate 1000, a 0.32 s run read 3.7 s on 6.18.)
  const uint64_t missing = std::min(target - credited, (weight + period - 1) / period);
  stats.unplaced = target - credited - missing;
  if (missing == 0) return;
  std::vector<uint64_t> w;
  for (const auto& [at, e] : ends) {
    w.push_back(e.w);
    // The part of threads with no sample of their own, at their creator's pc (the summary
    // says how much: agentless.hpp).
    stats.unsampled_credited +=
        static_cast<uint64_t>(static_cast<unsigned __int128>(missing) * e.unsampled_w / weight);
  }
  const std::vector<uint64_t> n = util::apportion(missing, w);
  size_t i = 0;
  for (const auto& [at, e] : ends) {
    const uint64_t k = n[i++];
    if (!k) continue;
    // The ends with no pc in their image: its program's entry point (credit_at_end).
    if (!at.second && imgs[at.first].entry_pc) stats.unsampled_process_credited += k;
    const uint64_t user = static_cast<uint64_t>(static_cast<unsigned __int128>(k) * e.user_w / e.w);
    credit_at_end(&imgs[at.first], at.second, k, k - user);
  }
}

}  // namespace sprofil::record
