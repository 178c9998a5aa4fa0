// Names and numbers as every output format prints them: object basenames, the command line,
// addresses, clock names, sample counts and row labels.
#pragma once

#include <cstdint>
#include <string>

#include "profile/profile.hpp"
#include "report/report.hpp"

namespace sprofil::report {

std::string basename_of(const std::string& path);
// argv joined with spaces.
std::string command_of(const profile::Profile& p);
std::string hex_addr(uint64_t a);
// "cpu (per-thread CPU-time timers)"
std::string clock_label(profile::Clock c);
// Whole numbers without decimals, fractional ones (split bins) with two.
std::string format_samples(double s);
// The label of a row in text output: function, object, file:line function, or address.
std::string label_of(const Row& r, By by);

}  // namespace sprofil::report
