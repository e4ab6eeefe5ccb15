// Configuration layering, value parsing, the config-file writer, the log filter and kache's own
// command-line recognition.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

#include "commands/cli.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "storage/open.hpp"

namespace {

namespace fs = std::filesystem;
using kache::core::Config;
// What the callers give it: the storage scheme table's rules.
Config load_config() { return kache::core::load_config(kache::storage::remote_url_schemes()); }

// Every variable load_config looks at (the table's KACHE_* variables and where the file is found);
// each test starts with all of them unset and restores them after.
std::vector<std::string> env_vars() {
  std::vector<std::string> names = {"KACHE_CONFIG", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "HOME"};
  for (auto& name : kache::core::config_environment_variables()) names.push_back(std::move(name));
  return names;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& name : env_vars()) {
      if (const char* value = std::getenv(name.c_str())) saved_[name] = value;
      ::unsetenv(name.c_str());
    }
    dir_ = fs::temp_directory_path() / ("kache-config-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = (dir_ / "config.toml").string();
    ::setenv("KACHE_CONFIG", file_.c_str(), 1);
    ::setenv("HOME", (dir_ / "home").c_str(), 1);
  }
  void TearDown() override {
    for (const auto& name : env_vars()) ::unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
    fs::remove_all(dir_);
  }
  void write(const std::string& text) { std::ofstream(file_) << text; }
  static std::string all(const std::vector<std::string>& problems) {
    std::string out;
    for (const auto& p : problems) out += p + "\n";
    return out;
  }

  fs::path dir_;
  std::string file_;
  std::map<std::string, std::string> saved_;
};

// Whoever shares a cache dir can write its kache.toml: what it may not do is widen what kache records
// of everyone's compiles (issue 41). The user's own file and environment still can.
TEST_F(ConfigTest, TheCacheDirsFileCannotWidenWhatIsRecorded) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  ::setenv("KACHE_DIR", cache.c_str(), 1);
  std::ofstream(cache / "kache.toml") << "[events]\ncommand_line = true\n[log]\nfile = \"/tmp/theirs.log\"\n"
                                         "filter = \"kache=trace\"\n[cache]\nmax_size = \"3G\"\n";
  Config c = load_config();
  EXPECT_FALSE(c.events_command_line);
  EXPECT_EQ(c.log_file, "");
  EXPECT_EQ(c.log_filter, "");
  EXPECT_EQ(c.max_size, 3ull << 30) << "the other settings of the file apply";
  for (const char* name : {"events.command_line", "log.file", "log.filter"}) {
    EXPECT_NE(all(c.problems).find(std::string("ignoring ") + name + " in " + (cache / "kache.toml").string()),
              std::string::npos)
        << all(c.problems);
  }
  write("[events]\ncommand_line = true\n");  // the user's own file
  EXPECT_TRUE(load_config().events_command_line);
}

TEST_F(ConfigTest, TheCacheDirsFileCannotWidenWhomKacheTrusts) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  ::setenv("KACHE_DIR", cache.c_str(), 1);
  std::ofstream(cache / "kache.toml") << "[remote_execution]\nserver = \"grpc://127.0.0.1:9\"\ntrusted = true\n"
                                         "[cache]\nallow_world_writable = true\n";
  Config c = load_config();
  EXPECT_EQ(c.remote_execution_server, "") << "every source would go to a server a group member chose";
  EXPECT_FALSE(c.remote_execution_trusted);
  EXPECT_FALSE(c.allow_world_writable);
  for (const char* name : {"remote_execution.server", "remote_execution.trusted", "cache.allow_world_writable"})
    EXPECT_NE(all(c.problems).find(std::string("ignoring ") + name), std::string::npos) << all(c.problems);
  write("[remote_execution]\ntrusted = true\n");  // the user's own file
  EXPECT_TRUE(load_config().remote_execution_trusted);
}

TEST_F(ConfigTest, DefaultsWithoutFileOrEnvironment) {
  const Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.config_file, file_);
  EXPECT_EQ(c.cache_dir, (dir_ / "home/.cache/kache").string());
  EXPECT_EQ(c.max_size, 10ull << 30);
  EXPECT_EQ(c.compression_level, 3);
  EXPECT_TRUE(c.direct_mode);
  EXPECT_FALSE(c.disable);
  EXPECT_TRUE(c.nvcc_path_normalize);
  EXPECT_TRUE(c.nvcc_cache_device_outputs);
  EXPECT_EQ(c.nvcc_source_date_epoch, "0");
  EXPECT_TRUE(c.extra_allowlist_flags.empty());
  EXPECT_TRUE(c.base_dirs.empty());
  EXPECT_TRUE(c.origins.empty());
}

TEST_F(ConfigTest, XdgDirectoriesAreUsed) {
  ::unsetenv("KACHE_CONFIG");
  ::setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  ::setenv("XDG_CONFIG_HOME", "/xdg/config", 1);
  const Config c = load_config();
  EXPECT_EQ(c.cache_dir, "/xdg/cache/kache");
  EXPECT_EQ(c.config_file, "/xdg/config/kache/config.toml");
  ::unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(load_config().config_file, (dir_ / "home/.config/kache/config.toml").string());
}

TEST_F(ConfigTest, FileOverridesDefaultsAndEnvironmentOverridesFile) {
  write(R"(
[cache]
dir = "/from/file"
max_size = "2G"
compression_level = 7
direct_mode = false

[nvcc]
source_date_epoch = "passthrough"

[log]
filter = "kache=debug"
)");
  Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.cache_dir, "/from/file");
  EXPECT_EQ(c.max_size, 2ull << 30);
  EXPECT_EQ(c.compression_level, 7);
  EXPECT_FALSE(c.direct_mode);
  EXPECT_EQ(c.nvcc_source_date_epoch, "passthrough");
  EXPECT_EQ(c.log_filter, "kache=debug");
  EXPECT_EQ(c.origins["cache.dir"], file_);  // the file it came from

  ::setenv("KACHE_DIR", "/from/env", 1);
  ::setenv("KACHE_MAX_SIZE", "500M", 1);
  ::setenv("KACHE_DIRECT_MODE", "yes", 1);
  c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.cache_dir, "/from/env");
  EXPECT_EQ(c.max_size, 500ull << 20);
  EXPECT_TRUE(c.direct_mode);
  EXPECT_EQ(c.compression_level, 7);  // still from the file
  EXPECT_EQ(c.origins["cache.dir"], "env");
  EXPECT_EQ(c.origins["cache.compression_level"], file_);

  const std::string listing = kache::core::describe_config(c);
  EXPECT_NE(listing.find(file_), std::string::npos) << listing;
  EXPECT_NE(listing.find("cache.dir"), std::string::npos) << listing;
  EXPECT_NE(listing.find("/from/env"), std::string::npos) << listing;
  EXPECT_NE(listing.find("(env KACHE_DIR)"), std::string::npos) << listing;
  EXPECT_NE(listing.find("(file " + file_ + ")"), std::string::npos) << listing;
  EXPECT_NE(listing.find("(default)"), std::string::npos) << listing;
  EXPECT_NE(listing.find("log.file"), std::string::npos) << listing;
}

// remote.storage is parsed once, when its layer is read: Config carries the list, with the secrets of
// the environment applied as the stores need them, and a bad list in a later layer (one problem) leaves
// the earlier list in force, its text and its parse alike.
TEST_F(ConfigTest, RemoteStorageIsCarriedParsedWithTheEnvironmentsSecrets) {
  write("[remote]\nstorage = \"redis://cache:7000/2|read-only  http://u@web/x https://tls/y\"\n");
  const std::map<std::string, std::string> secrets = {{"KACHE_REMOTE_PASSWORD", "pw"},
                                                      {"KACHE_REMOTE_BEARER_TOKEN", "tok"}};
  std::map<std::string, std::string> saved;
  for (const auto& [name, value] : secrets) {
    if (const char* old = std::getenv(name.c_str())) saved[name] = old;
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ::setenv("KACHE_REMOTE_STORAGE", "redis://bad:port", 1);
  const Config c = load_config();
  for (const auto& [name, value] : secrets) ::unsetenv(name.c_str());
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);

  EXPECT_EQ(c.problems.size(), 1u) << all(c.problems);
  EXPECT_EQ(c.remote_storage, "redis://cache:7000/2|read-only  http://u@web/x https://tls/y");
  EXPECT_EQ(c.remote_urls,
            kache::core::parse_remote_urls(c.remote_storage, {"pw", "tok"}, kache::storage::remote_url_schemes()));
  ASSERT_EQ(c.remote_urls.size(), 3u);
  EXPECT_EQ(c.remote_urls[0].password, "pw");
  EXPECT_EQ(c.remote_urls[1].password, "pw");
  EXPECT_EQ(c.remote_urls[2].bearer_token, "tok");
  EXPECT_TRUE(c.remote_urls[0].read_only);
  EXPECT_EQ(kache::core::config_value_text(c, "remote.storage"),
            "redis://cache:7000/2|read-only http://u@web/x https://tls/y");
}

TEST_F(ConfigTest, UnknownKeyNamesKeyAndFile) {
  write("[cache]\nmaxsize = \"1G\"\n[bogus]\nx = 1\n");
  const Config c = load_config();
  ASSERT_EQ(c.problems.size(), 2u) << all(c.problems);
  EXPECT_NE(
      std::find(c.problems.begin(), c.problems.end(), "kache: ignoring unknown key 'cache.maxsize' in " + file_ + "."),
      c.problems.end())
      << all(c.problems);
  const std::string text = all(c.problems);
  EXPECT_NE(text.find("'cache.maxsize'"), std::string::npos) << text;
  EXPECT_NE(text.find("bogus"), std::string::npos) << text;
  EXPECT_NE(text.find(file_), std::string::npos) << text;
  EXPECT_EQ(c.max_size, 10ull << 30);
}

TEST_F(ConfigTest, BadSizeFallsBackWithMessage) {
  ::setenv("KACHE_MAX_SIZE", "abc", 1);
  Config c = load_config();
  ASSERT_EQ(c.problems.size(), 1u) << all(c.problems);
  EXPECT_EQ(c.problems[0],
            "kache: KACHE_MAX_SIZE='abc' is not a size (a number with a unit K, M, G or T, e.g. 500M; 0: no limit); "
            "write it as, for example, KACHE_MAX_SIZE=10G; using 10.0 GiB.");
  EXPECT_EQ(c.max_size, 10ull << 30);

  // A bad variable leaves the file's valid value in force.
  write("[cache]\nmax_size = \"1G\"\n");
  c = load_config();
  EXPECT_EQ(c.max_size, 1ull << 30);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("using 1.0 GiB"), std::string::npos) << c.problems[0];

  ::unsetenv("KACHE_MAX_SIZE");
  write("[cache]\nmax_size = \"lots\"\n");
  c = load_config();
  EXPECT_EQ(c.max_size, 10ull << 30);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("cache.max_size"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find(file_), std::string::npos) << c.problems[0];
}

// A refused value in a file is one sentence with its fix: the file and line, the key, the value, what the
// key accepts and a line that would be accepted (issue 42).
TEST_F(ConfigTest, BadFileValueNamesTheFixWithAnExample) {
  write(
      "[cache]\nmax_size = \"lots\"\ndirect_mode = \"yes please\"\ncompression_level = 40\n"
      "[log]\nwarnings = \"tty\"\n");
  const Config c = load_config();
  ASSERT_EQ(c.problems.size(), 4u) << all(c.problems);
  // toml++ hands the keys over in its own order: each sentence is found by its key.
  auto about = [&](const std::string& key) {
    for (const auto& p : c.problems)
      if (p.starts_with("kache: " + key + " = ")) return p;
    return std::string("(none about ") + key + ")";
  };
  EXPECT_EQ(about("cache.max_size"),
            "kache: cache.max_size = 'lots' in " + file_ +
                " (line 2) is not a size (a number with a unit K, M, G or T, e.g. 500M; 0: no limit); "
                "write it as, for example, max_size = \"10G\" under [cache]; using 10.0 GiB.");
  EXPECT_EQ(about("cache.direct_mode"), "kache: cache.direct_mode = 'yes please' in " + file_ +
                                            " (line 3) is not a boolean (use 1/0, true/false, yes/no or on/off); "
                                            "write it as, for example, direct_mode = true under [cache]; using true.");
  EXPECT_NE(about("cache.compression_level")
                .find("is not a compression level from 1 to 19; write it as, for example, compression_level = 3 "
                      "under [cache]"),
            std::string::npos)
      << all(c.problems);
  EXPECT_EQ(about("log.warnings"), "kache: log.warnings = 'tty' in " + file_ +
                                       " (line 6) is neither \"stderr\" nor \"log\"; write it as, for example, "
                                       "warnings = \"log\" under [log]; using stderr.");
  for (const auto& p : c.problems) EXPECT_EQ(std::count(p.begin(), p.end(), '\n'), 0) << p;
}

TEST_F(ConfigTest, LogWarningsTakesStderrOrLog) {
  EXPECT_TRUE(load_config().warnings_to_stderr);
  ::setenv("KACHE_LOG_WARNINGS", "log", 1);
  EXPECT_FALSE(load_config().warnings_to_stderr);
  ::setenv("KACHE_LOG_WARNINGS", "Stderr", 1);
  EXPECT_TRUE(load_config().warnings_to_stderr);
}

TEST(WarningCause, FoldsPathsAndNumbersButNotRemotes) {
  using kache::core::warning_cause;
  EXPECT_EQ(warning_cause("cannot store /c/ab/1.o (No space left, 28)"),
            warning_cause("cannot store '/c/cd/22.o' (No space left, 31)"));
  EXPECT_EQ(warning_cause("remote took 103 ms"), "remote took # ms");
  EXPECT_NE(warning_cause("remote storage redis://a:1 failed"), warning_cause("remote storage redis://b:1 failed"));
  EXPECT_NE(warning_cause("cannot store /c/x"), warning_cause("cannot read /c/x"));
}

TEST(WarningCause, RemoteUrlsStayVerbatim) {
  using kache::core::warning_cause;
  EXPECT_NE(warning_cause("remote storage redis://127.0.0.1:1 failed (timeout 20 ms)"),
            warning_cause("remote storage redis://127.0.0.2:2 failed (timeout 20 ms)"));
  EXPECT_EQ(warning_cause("remote storage redis://127.0.0.1:1 failed (timeout 20 ms)"),
            warning_cause("remote storage redis://127.0.0.1:1 failed (timeout 31 ms)"));
}

TEST(ConfigureCheck, CcCrateMesonAndCMakeCompilerIdProbesAreChecks) {
  using kache::core::is_configure_check;
  EXPECT_TRUE(is_configure_check({"-Wlogical-op", "-c", "/t/out/flag_check.c", "-o", "/t/out/x.o"}, "/src"));
  EXPECT_TRUE(is_configure_check({"-c", "/b/meson-private/sanitycheckc.c", "-o", "/b/meson-private/s.o"}, "/b"));
  EXPECT_TRUE(is_configure_check({"-c", "testfile.c", "-o", "output.obj"}, "/b/meson-private/tmpab12"));
  EXPECT_TRUE(is_configure_check({"CMakeCCompilerId.c"}, "/b/CMakeFiles/3.25.1/CompilerIdC"));
  EXPECT_TRUE(is_configure_check({"-c", "CMakeFiles/3.25.1/CompilerIdCXX/CMakeCXXCompilerId.cpp"}, "/b"));
  EXPECT_FALSE(is_configure_check({"-c", "flag.c", "-o", "flag.o"}, "/src/build"));
  EXPECT_FALSE(is_configure_check({"-c", "a.c"}, "/src/meson-build/CMakeFiles/app.dir"));
}

// A compile typed at a terminal leads its own process group: a build of its own for warnings.
TEST(WarningBuild, HandTypedCompileIsItsOwnBuild) {
  using kache::core::own_build_for_warnings;
  EXPECT_TRUE(own_build_for_warnings(100, 100, true));
  EXPECT_FALSE(own_build_for_warnings(100, 100, false)) << "ninja's pipe: the build is ninja's group";
  EXPECT_FALSE(own_build_for_warnings(100, 90, true)) << "make's command in make's group";
}

// A process group's number comes back: the stamp names the leader's start too.
TEST(WarningBuild, ProcessGroupStampsNameTheLeadersStart) {
  using kache::core::stamp_build_key;
  const auto started = [](long pid) { return pid == 42 ? std::string("12345") : std::string(); };
  EXPECT_EQ(stamp_build_key("pg42", true, started), "pg42@12345");
  EXPECT_EQ(stamp_build_key("pg43", true, started), "pg43") << "no leader to read";
  EXPECT_EQ(stamp_build_key("pg42", false, started), "pg42") << "KACHE_BUILD_ID names the build itself";
  EXPECT_EQ(stamp_build_key("nightly", true, started), "nightly");
}

TEST_F(ConfigTest, TheCacheDirsFileCannotSendWarningsToStderr) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  ::setenv("KACHE_DIR", cache.c_str(), 1);
  write("[log]\nwarnings = \"log\"\n");
  std::ofstream(cache / "kache.toml") << "[log]\nwarnings = \"stderr\"\n";
  Config c = load_config();
  EXPECT_FALSE(c.warnings_to_stderr);
  EXPECT_NE(all(c.problems).find("ignoring log.warnings in " + (cache / "kache.toml").string()), std::string::npos)
      << all(c.problems);
}

// A bad value of a setting that may carry a credential is never quoted raw: not when it is no string
// (a list, a table), and not its URL's user or query string.
TEST_F(ConfigTest, BadValuesNeverEchoSecrets) {
  const char* cases[][2] = {
      {"[remote]\nstorage = [\"redis://:s3cret@host\"]\n", "s3cret"},
      {"[remote]\nstorage = { url = \"redis://:pw9@h\" }\n", "pw9"},
      {"[remote_execution]\nserver = [\"grpcs://u:tok7@h:1\"]\n", "tok7"},
      {"[remote_execution]\nserver = \"grpcs://re.example?token=qq8\"\n", "qq8"},
      {"[remote_execution]\nserver = \"http://re.example:1/x?access_token=zz5\"\n", "zz5"},
  };
  for (const auto& [text, secret] : cases) {
    write(text);
    const Config c = load_config();
    ASSERT_FALSE(c.problems.empty()) << text;
    EXPECT_EQ(all(c.problems).find(secret), std::string::npos) << "a secret printed: " << all(c.problems);
  }
  ::setenv("KACHE_REMOTE_EXECUTION", "grpc://re.example?token=ee4", 1);
  write("");
  const Config env = load_config();
  ASSERT_FALSE(env.problems.empty());
  EXPECT_EQ(all(env.problems).find("ee4"), std::string::npos) << all(env.problems);
  ::unsetenv("KACHE_REMOTE_EXECUTION");
}

TEST(ConfigureCheck, ConftestAndCMakeScratchDirsAreChecks) {
  using kache::core::is_configure_check;
  EXPECT_TRUE(is_configure_check({"-c", "conftest.c", "-o", "conftest.o"}, "/src/build"));
  EXPECT_TRUE(is_configure_check({"-c", "/tmp/x/conftest.cpp"}, "/"));
  EXPECT_TRUE(is_configure_check({"-c", "src.c"}, "/b/CMakeFiles/CMakeScratch/TryCompile-abc"));
  EXPECT_TRUE(is_configure_check({"-c", "src.c"}, "/b/CMakeFiles/CMakeTmp"));
  EXPECT_TRUE(is_configure_check({"-o", "CMakeFiles/CMakeScratch/T/x.o", "-c", "x.c"}, "/b"));
  EXPECT_FALSE(is_configure_check({"-c", "a.c", "-o", "a.o"}, "/src/build"));
  EXPECT_FALSE(is_configure_check({"-c", "myconftest.c"}, "/src/CMakeFiles/app.dir"));
}

TEST_F(ConfigTest, BadValuesOfOtherKindsFallBack) {
  write("[cache]\ncompression_level = 40\ndisable = \"maybe\"\n[log]\nfilter = 3\n");
  ::setenv("KACHE_NVCC_PATH_NORMALIZE", "sometimes", 1);
  ::setenv("KACHE_NVCC_SOURCE_DATE_EPOCH", "-5", 1);
  const Config c = load_config();
  EXPECT_EQ(c.problems.size(), 5u) << all(c.problems);
  EXPECT_EQ(c.compression_level, 3);
  EXPECT_FALSE(c.disable);
  EXPECT_TRUE(c.nvcc_path_normalize);
  EXPECT_EQ(c.nvcc_source_date_epoch, "0");
  EXPECT_TRUE(c.log_filter.empty());
  EXPECT_NE(all(c.problems).find("KACHE_NVCC_PATH_NORMALIZE='sometimes'"), std::string::npos);
}

TEST_F(ConfigTest, InvalidTomlIsReportedAndIgnored) {
  write("[cache\nmax_size = 1\n");
  const Config c = load_config();
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find(file_), std::string::npos) << c.problems[0];
  EXPECT_EQ(c.max_size, 10ull << 30);
}

TEST_F(ConfigTest, BooleansFromEnvironment) {
  const std::pair<const char*, bool> cases[] = {{"1", true},   {"0", false},  {"true", true}, {"FALSE", false},
                                                {"yes", true}, {"no", false}, {"On", true},   {"off", false}};
  for (const auto& [text, expected] : cases) {
    ::setenv("KACHE_DISABLE", text, 1);
    const Config c = load_config();
    EXPECT_TRUE(c.problems.empty()) << text;
    EXPECT_EQ(c.disable, expected) << text;
  }
  ::setenv("KACHE_DISABLE", "", 1);  // empty counts as unset
  const Config c = load_config();
  EXPECT_TRUE(c.problems.empty());
  EXPECT_FALSE(c.disable);
}

TEST_F(ConfigTest, CacheDeviceOutputsSwitch) {
  // The switch that restores spec 000's passthrough of -fatbin/-cubin/-ptx: file key and variable.
  kache::core::set_config_value(file_, "nvcc", "cache_device_outputs", "false");
  Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_FALSE(c.nvcc_cache_device_outputs);
  ::setenv("KACHE_NVCC_CACHE_DEVICE_OUTPUTS", "1", 1);
  c = load_config();
  EXPECT_TRUE(c.nvcc_cache_device_outputs);
  EXPECT_EQ(c.origins.at("nvcc.cache_device_outputs"), "env");
  ::setenv("KACHE_NVCC_CACHE_DEVICE_OUTPUTS", "maybe", 1);
  c = load_config();
  EXPECT_NE(all(c.problems).find("KACHE_NVCC_CACHE_DEVICE_OUTPUTS"), std::string::npos);
}

TEST_F(ConfigTest, ListsFromEnvironment) {
  ::setenv("KACHE_CC_EXTRA_ALLOWLIST_FLAGS", "--a,--b", 1);
  EXPECT_EQ(load_config().extra_allowlist_flags, (std::vector<std::string>{"--a", "--b"}));
  ::setenv("KACHE_CC_EXTRA_ALLOWLIST_FLAGS", "-lineinfo  --use_fast_math", 1);
  EXPECT_EQ(load_config().extra_allowlist_flags, (std::vector<std::string>{"-lineinfo", "--use_fast_math"}));
  ::setenv("KACHE_CC_EXTRA_ALLOWLIST_FLAGS", " --a, --b ,", 1);
  EXPECT_EQ(load_config().extra_allowlist_flags, (std::vector<std::string>{"--a", "--b"}));

  ::setenv("KACHE_PATHS_BASE_DIRS", "/a:/b/", 1);
  Config c = load_config();
  EXPECT_EQ(c.base_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);

  ::setenv("KACHE_PATHS_BASE_DIRS", "/a:relative", 1);
  c = load_config();
  EXPECT_TRUE(c.base_dirs.empty());
  EXPECT_EQ(c.problems.size(), 1u);
}

TEST_F(ConfigTest, ListsFromFile) {
  write("[cc]\nextra_allowlist_flags = [\"--maxrregcount\", \"-lineinfo\"]\n[paths]\nbase_dirs = [\"/src\"]\n");
  Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.extra_allowlist_flags, (std::vector<std::string>{"--maxrregcount", "-lineinfo"}));
  EXPECT_EQ(c.base_dirs, (std::vector<std::string>{"/src"}));

  write("[cc]\nextra_allowlist_flags = [1, 2]\n");
  c = load_config();
  EXPECT_EQ(c.problems.size(), 1u);
  EXPECT_TRUE(c.extra_allowlist_flags.empty());
}

TEST(ConfigSize, ParseSize) {
  using kache::core::parse_size;
  const std::pair<const char*, std::uint64_t> good[] = {
      {"123", 123},
      {"0", 0},
      {"1K", 1024},
      {"1k", 1024},
      {"1KiB", 1024},
      {"1KB", 1024},
      {"500M", 500ull << 20},
      {"10G", 10ull << 30},
      {"10 GiB", 10ull << 30},
      {"1.5GiB", (3ull << 30) / 2},
      {"0.5M", 512ull << 10},
      {"2T", 2ull << 40},
      {"  7B ", 7},
  };
  for (const auto& [text, expected] : good) {
    std::uint64_t bytes = 1;
    EXPECT_TRUE(parse_size(text, bytes)) << text;
    EXPECT_EQ(bytes, expected) << text;
  }
  for (const char* text :
       {"", "abc", "G", "-1", "1X", "1GG", "1.5", "1..5G", "1 G i", "99999999999999999999", "20000000T"}) {
    std::uint64_t bytes = 0;
    EXPECT_FALSE(parse_size(text, bytes)) << text;
  }
}

TEST(ConfigSize, FormatSize) {
  using kache::core::format_size;
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_size(1024), "1.0 KiB");
  EXPECT_EQ(format_size(10ull << 30), "10.0 GiB");
  EXPECT_EQ(format_size(1536ull << 20), "1.5 GiB");
}

TEST_F(ConfigTest, SetConfigValueRoundtrip) {
  write("# mine\n[cache]\ncompression_level = 5\n[cc]\nextra_allowlist_flags = [\"--x\"]\n");
  kache::core::set_config_value(file_, "cache", "max_size", "3G");
  Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.max_size, 3ull << 30);
  EXPECT_EQ(c.compression_level, 5);
  EXPECT_EQ(c.extra_allowlist_flags, (std::vector<std::string>{"--x"}));

  kache::core::set_config_value(file_, "cache", "max_size", "1M");
  kache::core::set_config_value(file_, "nvcc", "path_normalize", "false");
  c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.max_size, 1ull << 20);
  EXPECT_FALSE(c.nvcc_path_normalize);
  EXPECT_EQ(c.compression_level, 5);

  // A file that does not exist yet, in a directory that does not exist yet.
  const std::string fresh = (dir_ / "new/dir/config.toml").string();
  kache::core::set_config_value(fresh, "cache", "max_size", "2G");
  ::setenv("KACHE_CONFIG", fresh.c_str(), 1);
  EXPECT_EQ(load_config().max_size, 2ull << 30);

  // An unparsable file is left alone.
  write("[cache\n");
  EXPECT_THROW(kache::core::set_config_value(file_, "cache", "max_size", "1G"), std::runtime_error);
  std::ifstream in(file_);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "[cache\n");
}

TEST(ConfigBool, ParseBool) {
  bool b = false;
  EXPECT_TRUE(kache::core::parse_bool("YES", b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(kache::core::parse_bool(" off ", b));
  EXPECT_FALSE(b);
  EXPECT_FALSE(kache::core::parse_bool("2", b));
  EXPECT_FALSE(kache::core::parse_bool("", b));
}

// Which words are kache's own command line and which a compile (CMake's launcher forms).
TEST(ConfigCli, RecognisesKacheInvocations) {
  auto is_kache = [](std::vector<std::string> words) {
    words.insert(words.begin(), "kache");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    return kache::commands::is_kache_invocation(static_cast<int>(argv.size()), argv.data());
  };
  for (const auto& words : std::vector<std::vector<std::string>>{{"-s"},
                                                                 {"--show-stats"},
                                                                 {"-z"},
                                                                 {"-C"},
                                                                 {"-M", "5G"},
                                                                 {"--max-size=5G"},
                                                                 {"-p"},
                                                                 {"-V"},
                                                                 {"--help"},
                                                                 {"--bogus"},
                                                                 {"-c"},
                                                                 {"-o", "cache.max_size=1G"},
                                                                 {"-k", "cache.dir"},
                                                                 {"-sz"},
                                                                 {"-F", "10"},
                                                                 {"--evict-older-than", "3d"},
                                                                 {"doctor"},
                                                                 {"explain", "--last"},
                                                                 {}}) {
    EXPECT_TRUE(is_kache(words)) << (words.empty() ? "" : words[0]);
  }
  for (const auto& words : std::vector<std::vector<std::string>>{{"nvcc", "-c", "k.cu"},
                                                                 {"/usr/local/cuda/bin/nvcc"},
                                                                 {"-forward-unknown-to-host-compiler", "-v"},
                                                                 {"-c", "k.cu", "-o", "k.o"},
                                                                 {"-x", "cu", "-c", "-", "-o", "k.o"},
                                                                 {"-O2", "a.o", "-o", "app"}}) {
    EXPECT_FALSE(is_kache(words)) << words[0];
  }
}

TEST(LogFilter, Levels) {
  using kache::core::parse_log_filter;
  using spdlog::level::level_enum;
  const std::pair<const char*, level_enum> cases[] = {
      {"", level_enum::warn},
      {"debug", level_enum::debug},
      {"kache=debug", level_enum::debug},
      {"kache=trace", level_enum::trace},
      {"info", level_enum::info},
      {"warn", level_enum::warn},
      {"off", level_enum::off},
      {"error", level_enum::err},
      {"warn,kache=debug", level_enum::debug},
      {"kache=debug,warn", level_enum::warn},  // the last matching item wins
      {"other=debug", level_enum::warn},       // someone else's target
      {"kache=info,other=trace", level_enum::info},
      {"kache", level_enum::trace},
      {" KACHE = Debug ", level_enum::debug},
      {"kache::storage=debug", level_enum::debug},
  };
  for (const auto& [filter, expected] : cases) {
    const auto level = parse_log_filter(filter);
    ASSERT_TRUE(level.has_value()) << filter;
    EXPECT_EQ(*level, expected) << filter;
  }
  for (const char* bad : {"debgu", "kache=loud", "=debug", "warn,kache="}) {
    EXPECT_FALSE(parse_log_filter(bad).has_value()) << bad;
  }
}

TEST(LogFile, AppendsWithPattern) {
  const fs::path file = fs::temp_directory_path() / ("kache-log-test-" + std::to_string(::getpid()) + ".log");
  fs::remove(file);
  { std::ofstream(file) << "earlier line\n"; }
  kache::core::init_logging("kache=debug", file.string());
  kache::core::log().debug("hello {}", 42);
  kache::core::log().trace("not shown");
  std::ifstream in(file);
  std::stringstream content;
  content << in.rdbuf();
  // The pid, then the time (ISO 8601, milliseconds, UTC offset).
  const std::regex line("earlier line\n\\[kache " + std::to_string(::getpid()) +
                        " \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}[+-]\\d\\d:?\\d\\d\\] debug: hello 42\n");
  EXPECT_TRUE(std::regex_match(content.str(), line)) << content.str();
  fs::remove(file);

  // An unusable file falls back to stderr instead of throwing.
  EXPECT_NO_THROW(kache::core::init_logging("bogus-filter", "/proc/definitely/not/writable.log"));
  EXPECT_EQ(kache::core::log().level(), spdlog::level::warn);
  kache::core::init_logging("", "");
}

}  // namespace

// [remote_execution] (docs/remote-execution.md): a grpc:// or grpcs:// server, an instance, a timeout in
// seconds (an integer or a float in TOML); a server of another scheme, or with a user in it, is refused
// with one sentence naming the variable (the secret not quoted), and the file's value stays.
TEST_F(ConfigTest, RemoteExecutionSettings) {
  write(R"(
[remote_execution]
server = "grpcs://re.example:443"
instance = "main"
timeout = 90
)");
  Config c = load_config();
  EXPECT_TRUE(c.problems.empty()) << all(c.problems);
  EXPECT_EQ(c.remote_execution_server, "grpcs://re.example:443");
  EXPECT_EQ(c.remote_execution_instance, "main");
  EXPECT_EQ(c.remote_execution_timeout_s, 90.0);

  for (const char* bad : {"http://re.example:80", "grpc://user:token@re.example:443", "grpc://re.example"}) {
    ::setenv("KACHE_REMOTE_EXECUTION", bad, 1);
    Config refused = load_config();
    EXPECT_EQ(refused.remote_execution_server, "grpcs://re.example:443") << bad;  // the file's value stays
    ASSERT_EQ(refused.problems.size(), 1u) << bad;
    EXPECT_NE(refused.problems[0].find("KACHE_REMOTE_EXECUTION"), std::string::npos) << refused.problems[0];
    EXPECT_EQ(refused.problems[0].find("token@"), std::string::npos) << "a secret printed: " << refused.problems[0];
  }
  ::setenv("KACHE_REMOTE_EXECUTION_TIMEOUT", "-1", 1);
  ::unsetenv("KACHE_REMOTE_EXECUTION");
  EXPECT_EQ(load_config().problems.size(), 1u);
}
