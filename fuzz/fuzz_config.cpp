// Fuzzes the configuration: a TOML file and every KACHE_* variable, read through load_config(), plus
// the size and boolean parsers on their own.
// Input: "TOML\x1eKACHE_DIR\x1eKACHE_MAX_SIZE\x1e..." (the variables in the order of config_environment_variables()).
// Properties: load_config never throws and always yields a usable config (a non-empty cache dir, a
// size above 0, a compression level from 1 to 19, an epoch that is digits or "passthrough", absolute
// base dirs); a size that parses reads back the same from its decimal bytes; describe_config renders.
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/config.hpp"
#include "fuzz_check.hpp"
#include "storage/open.hpp"
#include "util/fs.hpp"

using namespace kache;

namespace {

// The table's variables, in its order (the seeds' sections follow it; settings added later come last).
const std::vector<std::string> kEnv = core::config_environment_variables();

void check_size_text(const std::string& text) {
  std::uint64_t bytes = 0;
  if (!core::parse_size(text, bytes)) return;
  std::uint64_t again = 0;
  KACHE_FUZZ_CHECK(core::parse_size(std::to_string(bytes), again) && again == bytes);
  KACHE_FUZZ_CHECK(!core::format_size(bytes).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string file = [] {
    const std::string dir = "/tmp/kache-fuzz-config." + std::to_string(::getpid());
    util::create_directories(dir);
    ::setenv("HOME", dir.c_str(), 1);
    return dir + "/config.toml";
  }();
  const auto sections = kache::fuzz::split(kache::fuzz::as_view(data, size), '\x1e');
  util::write_file(file, sections[0]);
  ::setenv("KACHE_CONFIG", file.c_str(), 1);
  for (std::size_t i = 0; i < kEnv.size(); ++i) {
    // setenv cannot hold a NUL: the value ends there, as it would in a real environment.
    if (i + 1 < sections.size()) {
      ::setenv(kEnv[i].c_str(), sections[i + 1].c_str(), 1);
    } else {
      ::unsetenv(kEnv[i].c_str());
    }
  }

  const core::Config c = core::load_config(storage::remote_url_schemes());
  KACHE_FUZZ_CHECK(!c.cache_dir.empty());
  // max_size 0 means no limit (kache -M 0, as ccache), so any value is a valid limit.
  KACHE_FUZZ_CHECK(c.compression_level >= 1 && c.compression_level <= 19);
  KACHE_FUZZ_CHECK(c.nvcc_source_date_epoch == "passthrough" ||
                   (!c.nvcc_source_date_epoch.empty() &&
                    c.nvcc_source_date_epoch.find_first_not_of("0123456789") == std::string::npos));
  for (const auto& d : c.base_dirs) KACHE_FUZZ_CHECK(d.starts_with('/'));
  KACHE_FUZZ_CHECK(!core::describe_config(c).empty());

  for (const auto& s : sections) {
    check_size_text(s);
    bool b = false;
    (void)core::parse_bool(s, b);
  }
  return 0;
}
