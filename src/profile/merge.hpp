// Summing profiles of the same program (several runs, or a parent and its fork children).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::profile {

// True when a and b describe the same object: equal build-ids when both have one, else equal
// paths.
bool same_object(const Region& a, const Region& b);

// Sums `in` into *out. Regions are matched by object (same_object) and file_offset, so runs
// loaded at different addresses (ASLR) merge; a matched pair must also have the same size
// (end - start) and bin_size, else it is an error naming the object. Counts and their system
// parts are summed bin by bin, saturating at UINT64_MAX (SPROF_R_SYSTEM is kept if any input
// has it), and counter_width widens as needed; regions present in only
// some inputs are kept. overflow, delivered and lost are summed. tick_ns must agree; clock,
// requested_hz, pid, ppid and argv come from the first input; FINISHED is set only if every
// input finished. Run profiles merge too: every process's regions are summed into one
// single-process result (the per-process split is not kept). If `bad_input` is given it receives
// the index of the input that caused the error (or in.size() when no single input is at fault).
bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error);
bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error,
                    size_t* bad_input);

// What merge does with inputs of different programs (the root process's main executable, or
// its command name when no region is marked main) or different clocks: refuse (an error naming
// both) unless `force`, in which case each difference is a warning. Clocks of one measure (the
// CPU clocks: cpu, itimer, perf, sampler) count the same quantity, but the merged profile, of
// one process, names one clock, the first input's, for all its samples: refused as well, and
// the message says so. The overloads without a policy merge them silently (force, no
// warnings), as they always did.
struct MergePolicy {
  bool force = false;
  std::vector<std::string>* warnings = nullptr;
};
bool merge_profiles(const std::vector<Profile>& in, Profile* out, std::string* error,
                    size_t* bad_input, const MergePolicy& policy);

// The program a profile is of: its root process's main executable path, else its comm.
std::string program_of(const Profile& p);

// The two differences merge refuses without `force`, as one message each, or "" when there is
// none; `a_is` and `b_is` name the profiles in it. Clocks: "clock differs: perf in the first
// profile, sampler in this one; both measure CPU time", or, of different measures
// (profile::same_measure), "clock differs: cpu in the first profile, wall in this one: their
// samples measure different things, CPU time and thread time on and off the CPU".
// `sprofil diff` asks the same questions (src/report/diff.cpp).
std::string clock_difference(const Profile& a, const Profile& b, const std::string& a_is,
                             const std::string& b_is);
// Programs differ when program_of differs; with `by_file_name`, only when their file names
// differ (diff, which matches objects by file name: two builds of a program in two directories
// are one program there). Main executables of one build-id are one program wherever they ran.
std::string program_difference(const Profile& a, const Profile& b, const std::string& a_is,
                               const std::string& b_is, bool by_file_name = false);

}  // namespace sprofil::profile
