// The pipeline (engine/pipeline_steps.hpp) on its own: storage in memory (a PipelineStore) and an adapter
// whose "compile" copies the source to the object with /bin/sh, so the hot path's decisions are tested
// in milliseconds without a compiler: hit, miss, a corrupt value, a store or remote that fails, an
// input that changes, and each family of passthrough the pipeline itself decides.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/pipeline_steps.hpp"
#include "engine/pipeline_store.hpp"
#include "core/stats.hpp"
#include "storage/layered.hpp"
#include "storage/local/local_storage.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::engine {
namespace {
using namespace kache::core;

using pipeline_steps::Counts;
using pipeline_steps::Pipeline;

// Every value the pipeline stores, in memory, as the layered stores hand it back (decoded). `fail`
// makes every call fail as a broken store does.
class MemoryStore final : public PipelineStore {
 public:
  storage::StorageLookup get_record(std::string_view key) override {
    if (fail) return failure();
    const auto it = records.find(std::string(key));
    if (it == records.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  storage::StorageStatus put_record(std::string_view key, std::string_view value) override {
    if (fail) return failure();
    records[std::string(key)] = value;
    return util::Done{};
  }
  storage::StorageStatus put_local_record(std::string_view key, std::string_view value) override {
    ++local_record_puts;
    return put_record(key, value);
  }
  storage::StorageResult<std::optional<storage::Parts>> get_parts(std::string_view key, const std::string&) override {
    if (fail) return failure();
    const auto it = entries.find(std::string(key));
    if (it == entries.end()) return std::optional<storage::Parts>();
    return std::optional<storage::Parts>(storage::Parts{it->second, "", 0, nullptr});
  }
  storage::StorageStatus put_parts(std::string_view key, std::string_view head, std::string_view body) override {
    if (fail) return failure();
    entries[std::string(key)] = std::string(head) + std::string(body);
    return util::Done{};
  }
  storage::StorageStatus put_local_parts(std::string_view key, std::string_view head, std::string_view body) override {
    return put_parts(key, head, body);
  }
  void remove(std::string_view key) override {
    records.erase(std::string(key));
    entries.erase(std::string(key));
  }
  std::string put_explain_record(std::string_view, std::string_view) override { return ""; }
  int corrupt_found() const override { return 0; }
  void add_counts(std::map<std::string, std::uint64_t>&) const override {}

  std::map<std::string, std::string> records;  // manifests, by key
  std::map<std::string, std::string> entries;  // result entries (head and body), by key
  bool fail = false;
  int local_record_puts = 0;

 private:
  static storage::StorageFailure failure() { return {storage::StorageFailure::Kind::error, "injected"}; }
};

// `test SOURCE OUTPUT [HEADER...]`: the object is the source's bytes, and the dependency list names the
// source and the headers. A source holding "#error" fails to compile; touch_during_compile is modified
// while the compile runs; "-E" is refused by the adapter as a real one refuses a flag.
class CopyAdapter final : public compiler::Adapter {
 public:
  std::string name() const override { return "test"; }
  std::variant<compiler::Passthrough, compiler::CompileJob> prepare(const Invocation& inv, const Config&) override {
    if (inv.args.size() < 2 || inv.args[0] == "-E") return compiler::Passthrough{"test-refused", "-E"};
    compiler::CompileJob job;
    job.source = util::lexically_normal(util::join_path(inv.cwd, inv.args[0]));
    job.output = util::lexically_normal(util::join_path(inv.cwd, inv.args[1]));
    job.output_written = inv.args[1];
    job.key_fields = {{"compiler", "test"}};
    job.source_identity = job.source;
    job.description = "the test adapter";
    // The build, source and output directories as path roots, as the real adapters map them.
    if (with_roots) {
      job.roots = core::PathRoots({{util::lexically_normal(inv.cwd), "/kache/build"},
                                   {util::dirname(job.source), "/kache/src"},
                                   {util::dirname(job.output), "/kache/out"}});
    }
    return job;
  }
  std::vector<std::string> miss_command(const Invocation& inv, const compiler::CompileJob& job,
                                        const compiler::MissPaths& paths) const override {
    std::string script = "if grep -q '#error' \"$1\"; then exit 1; fi; cat \"$1\" > \"$2\"; d=\"$3\"";
    script += "; printf '%s:' \"$2\" > \"$d\"; shift 3; for f in \"$@\"; do printf ' %s' \"$f\"; done >> \"$d\"";
    if (!touch_during_compile.empty()) script += "; echo changed >> '" + touch_during_compile + "'";
    std::vector<std::string> argv = {"sh", "-c", script, "sh", job.source, paths.object, paths.depfile, job.source};
    for (std::size_t i = 2; i < inv.args.size(); ++i) argv.push_back(util::join_path(inv.cwd, inv.args[i]));
    return argv;
  }
  void miss_environment(util::Environment&, const Config&) const override {}
  std::vector<std::string> closure_command(const Invocation&, const compiler::CompileJob&) const override { return {}; }
  std::vector<std::string> path_specific_markers() const override { return {}; }

  std::string touch_during_compile;
  bool with_roots = false;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.cache_dir = util::join_path(dir_.path(), "cache");
    util::create_directories(util::join_path(dir_.path(), "out"));
    write("h.h", "int h;\n");
    write("a.c", "#include \"h.h\"\nint a;\n");
  }

  // Writes a file of the build, then waits until the file clock has passed its times: a compile that
  // starts afterwards sees it as written before, as a build's sources are.
  void write(const std::string& name, const std::string& text) {
    const std::string path = util::join_path(dir_.path(), name);
    util::write_file(path, text);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    const std::int64_t changed = std::int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
    while (util::file_clock_now_ns() <= changed) std::this_thread::yield();
  }
  std::string path(const std::string& name) const { return util::join_path(dir_.path(), name); }

  struct Run {
    std::optional<int> code;  // nullopt: passed through
    std::string passthrough;  // its reason
    Counts counts;
  };
  Run compile(std::vector<std::string> args, PipelineStore& store, const std::string& cwd = "") {
    Invocation inv;
    inv.compiler_arg = "sh";
    inv.compiler_path = "/bin/sh";
    inv.args = std::move(args);
    inv.cwd = cwd.empty() ? dir_.path() : cwd;
    inv.env = util::current_environment();
    Run run;
    Pipeline pipeline(inv, cfg_, adapter_, run.counts, store);
    run.code = pipeline.run();
    if (!run.code || *run.code < 0) {
      run.passthrough = pipeline.passthrough().reason;
      run.code.reset();
    }
    return run;
  }
  Run compile(std::vector<std::string> args) { return compile(std::move(args), store_); }
  static std::uint64_t count(const Run& run, const std::string& name) {
    const auto it = run.counts.find(name);
    return it == run.counts.end() ? 0 : it->second;
  }

  util::TempDir dir_{(std::filesystem::temp_directory_path() / "kache-unit").string()};
  Config cfg_;
  CopyAdapter adapter_;
  MemoryStore store_;
};

TEST_F(PipelineTest, MissStoresAndTheSameCompileHits) {
  const Run miss = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(miss.code, 0) << miss.passthrough;
  EXPECT_EQ(count(miss, counter::kMisses), 1u);
  EXPECT_EQ(count(miss, counter::kStored), 1u);
  EXPECT_EQ(util::read_file(path("out/a.o")), "#include \"h.h\"\nint a;\n");
  EXPECT_EQ(store_.records.size(), 1u);  // the manifest
  EXPECT_EQ(store_.entries.size(), 1u);  // the result

  ASSERT_EQ(::unlink(path("out/a.o").c_str()), 0);
  const Run hit = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(hit.code, 0) << hit.passthrough;
  EXPECT_EQ(count(hit, counter::kHits), 1u);
  EXPECT_EQ(count(hit, counter::kDirectHits), 1u);
  EXPECT_EQ(count(hit, counter::kMisses), 0u);
  EXPECT_EQ(util::read_file(path("out/a.o")), "#include \"h.h\"\nint a;\n");  // restored, not compiled
}

// Issue 35: an object naming only its source directory (__FILE__) is stored under that directory's path
// alone, so a second build directory of the checkout hits it; a copy of the source elsewhere does not.
TEST_F(PipelineTest, AnObjectNamingTheSourceDirHitsFromEveryBuildDir) {
  adapter_.with_roots = true;
  util::create_directories(path("src"));
  for (const char* dir : {"b1", "b2", "other/src", "other/b1"}) util::create_directories(path(dir));
  write("src/f.c", "const char* f = \"" + path("src") + "/f.c\";\n");
  write("other/src/f.c", util::read_file(path("src/f.c")));
  const Run first = compile({"../src/f.c", "f.o"}, store_, path("b1"));
  ASSERT_EQ(first.code, 0) << first.passthrough;
  EXPECT_EQ(count(first, counter::kStoredPerCheckoutPrefix + std::string("path-in-object")), 1u);
  const Run second = compile({"../src/f.c", "f.o"}, store_, path("b2"));
  ASSERT_EQ(second.code, 0) << second.passthrough;
  EXPECT_EQ(count(second, counter::kHits), 1u);
  EXPECT_EQ(util::read_file(path("b2/f.o")), util::read_file(path("src/f.c")));
  // The same bytes in another checkout would name the first one's directory: not found there.
  const Run elsewhere = compile({"../src/f.c", "f.o"}, store_, path("other/b1"));
  ASSERT_EQ(elsewhere.code, 0) << elsewhere.passthrough;
  EXPECT_EQ(count(elsewhere, counter::kHits), 0u);
  EXPECT_EQ(count(elsewhere, counter::kMisses), 1u);
}

TEST_F(PipelineTest, ChangedHeaderIsNoHit) {
  ASSERT_EQ(compile({"a.c", "out/a.o", "h.h"}).code, 0);
  write("h.h", "int h2;\n");  // the entry's recorded content no longer holds (verify reads it)
  const Run again = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(again.code, 0);
  EXPECT_EQ(count(again, counter::kHits), 0u);
  EXPECT_EQ(count(again, counter::kMisses), 1u);
  EXPECT_EQ(count(again, counter::kStored), 1u);
}

TEST_F(PipelineTest, InputChangedDuringTheMissIsNotStored) {
  adapter_.touch_during_compile = path("h.h");
  const Run run = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(run.code, 0);  // the build still gets its object
  EXPECT_TRUE(util::exists(path("out/a.o")));
  EXPECT_EQ(count(run, counter::kStored), 0u);
  EXPECT_EQ(count(run, counter_name(ReasonCategory::NotStored, reason::kInputChanged)), 1u);
  EXPECT_TRUE(store_.entries.empty());
  EXPECT_TRUE(store_.records.empty());
}

TEST_F(PipelineTest, CorruptManifestIsCountedRemovedAndReplaced) {
  ASSERT_EQ(compile({"a.c", "out/a.o", "h.h"}).code, 0);
  ASSERT_EQ(store_.records.size(), 1u);
  const std::string manifest_key = store_.records.begin()->first;
  store_.records.begin()->second = "not a manifest";
  const Run run = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(run.code, 0);
  EXPECT_EQ(count(run, counter::kCorrupt), 1u);
  EXPECT_EQ(count(run, counter::kMisses), 1u);
  EXPECT_NE(store_.records.at(manifest_key), "not a manifest");  // the miss stored a good one
}

TEST_F(PipelineTest, CorruptEntryIsCountedRemovedAndTheCompileRuns) {
  ASSERT_EQ(compile({"a.c", "out/a.o", "h.h"}).code, 0);
  ASSERT_EQ(store_.entries.size(), 1u);
  std::string& entry = store_.entries.begin()->second;
  entry.resize(entry.size() / 2);  // a truncated value: kache's format, damaged
  const Run run = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(run.code, 0);
  EXPECT_EQ(count(run, counter::kCorrupt), 1u);
  EXPECT_EQ(count(run, counter::kHits), 0u);
  EXPECT_EQ(count(run, counter::kMisses), 1u);
  EXPECT_EQ(util::read_file(path("out/a.o")), "#include \"h.h\"\nint a;\n");
}

TEST_F(PipelineTest, FailingStoreCostsTheCacheNotTheBuild) {
  store_.fail = true;
  const Run run = compile({"a.c", "out/a.o", "h.h"});
  ASSERT_EQ(run.code, 0);
  EXPECT_EQ(util::read_file(path("out/a.o")), "#include \"h.h\"\nint a;\n");
  EXPECT_EQ(count(run, counter_name(ReasonCategory::Error, reason::kStorageRead)), 1u);
  EXPECT_EQ(count(run, counter_name(ReasonCategory::Error, reason::kStorageWrite)), 1u);
  EXPECT_EQ(count(run, counter::kStored), 0u);
}

// The remote fails (every call), so the layered stores switch it off: the local store serves alone.
TEST_F(PipelineTest, FailingRemoteIsSwitchedOffAndTheLocalStoreServes) {
  class BrokenRemote final : public storage::Storage {
   public:
    std::string name() const override { return "broken"; }
    storage::StorageLookup get(std::string_view) override { return fail(); }
    storage::StorageStatus put(std::string_view, std::string_view) override { return fail(); }
    storage::StorageStatus remove(std::string_view) override { return fail(); }

   private:
    static storage::StorageFailure fail() { return {storage::StorageFailure::Kind::timeout, "injected"}; }
  };
  auto layered = [&] {
    std::vector<std::unique_ptr<storage::Storage>> remotes;
    remotes.push_back(std::make_unique<BrokenRemote>());
    return LayeredPipelineStore(storage::LayeredStorage(
        std::make_unique<storage::LocalStorage>(storage::LocalStorageOptions{cfg_.cache_dir, 1ull << 30}),
        std::move(remotes), PartsEncoding{true, 3}));
  };
  LayeredPipelineStore first = layered();
  const Run miss = compile({"a.c", "out/a.o", "h.h"}, first);
  ASSERT_EQ(miss.code, 0);
  EXPECT_EQ(count(miss, counter::kStored), 1u);
  EXPECT_EQ(count(miss, counter_name(ReasonCategory::Error, reason::kStorageRead)), 0u);
  LayeredPipelineStore second = layered();
  const Run hit = compile({"a.c", "out/a.o", "h.h"}, second);
  ASSERT_EQ(hit.code, 0);
  EXPECT_EQ(count(hit, counter::kHits), 1u);
}

TEST_F(PipelineTest, AdapterRefusalPassesThrough) {
  const Run run = compile({"-E", "a.c"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, "test-refused");
  EXPECT_TRUE(store_.records.empty());
}

TEST_F(PipelineTest, MissingSourcePassesThroughAsTheCompilersError) {
  const Run run = compile({"gone.c", "out/gone.o"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kCompileFailed);
  EXPECT_EQ(count(run, counter_name(ReasonCategory::CompileFailed, reason::kCompileFailed)), 1u);
}

TEST_F(PipelineTest, FailedCompilePassesThrough) {
  write("bad.c", "#error no\n");
  const Run run = compile({"bad.c", "out/bad.o"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kCompileFailed);
  EXPECT_FALSE(util::exists(path("out/bad.o")));
  EXPECT_TRUE(store_.entries.empty());
}

TEST_F(PipelineTest, SpecialSourcePassesThrough) {
  ASSERT_EQ(::mkfifo(path("fifo.c").c_str(), 0600), 0);
  const Run run = compile({"fifo.c", "out/a.o"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kSourceSpecial);
}

TEST_F(PipelineTest, SpecialDestinationPassesThrough) {
  ASSERT_EQ(::mkfifo(path("out/a.o").c_str(), 0600), 0);
  const Run run = compile({"a.c", "out/a.o", "h.h"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kOutputSpecial);
}

TEST_F(PipelineTest, MissingOutputDirectoryPassesThrough) {
  const Run run = compile({"a.c", "nodir/a.o", "h.h"});
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kOutputDirMissing);
  EXPECT_FALSE(util::exists(path("nodir")));  // kache creates none of the user's directories
}

TEST_F(PipelineTest, DestinationThroughALinkPassesThrough) {
  util::create_directories(path("elsewhere/sub"));
  util::create_directories(path("elsewhere/out"));
  ASSERT_EQ(::symlink(path("elsewhere/sub").c_str(), path("lnk").c_str()), 0);
  const Run run = compile({"a.c", "lnk/../out/a.o", "h.h"});  // the kernel resolves lnk/.. to elsewhere
  EXPECT_FALSE(run.code);
  EXPECT_EQ(run.passthrough, reason::kOutputPathThroughLink);
}

}  // namespace
}  // namespace kache::engine
