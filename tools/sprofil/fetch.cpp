// `sprofil fetch PID|SOCKET -o FILE`: one live snapshot of a running program as a .sprof file.
#include <cstdio>
#include <memory>
#include <string>

#include "live/client.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "record/buildid_store.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

Run setup_fetch(CLI::App& sub) {
  struct Args {
    std::string target;
    std::string out = "sprofil.live";
    int timeout_ms = 10000;
    bool buildid_cache = true;
  };
  auto args = std::make_shared<Args>();
  add_live_target(sub, args->target)->required();
  add_output(sub, args->out, "The .sprof file to write")->capture_default_str();
  sub.add_option("--timeout", args->timeout_ms, "Give up after this many milliseconds")
      ->transform(whole_number<int>(1))
      ->capture_default_str();
  add_no_buildid_cache(sub, args->buildid_cache);
  return [args] {
    std::string socket, err;
    profile::Profile p;
    if (!live::socket_of(args->target, &socket, &err) ||
        !live::fetch_profile(socket, &p, &err, args->timeout_ms)) {
      return fail("fetch", err);
    }
    if (!profile::write_profile(p, args->out, &err)) {
      return fail("fetch", args->out + ": " + err);
    }
    std::fprintf(stderr, "sprofil fetch: pid %d: %llu samples in %zu regions -> %s\n", p.pid,
                 static_cast<unsigned long long>(p.total_samples()), p.regions.size(),
                 args->out.c_str());
    if (args->buildid_cache) record::say_not_kept(record::keep_objects(p), "fetch", false, stderr);
    return 0;
  };
}

}  // namespace sprofil::tool
