#include "engine/explain_record.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/argument_facts.hpp"
#include "compiler/job_paths.hpp"
#include "core/config.hpp"
#include "core/depfile.hpp"
#include "core/invocation.hpp"
#include "core/log.hpp"
#include "core/reasons.hpp"
#include "util/beneath.hpp"
#include "util/cache_umask.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/text.hpp"


namespace kache::engine::explain {
// The engine speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kRecordSchema = "kache-explain-record-1";

std::string source_dir_name(const std::string& source) { return util::sha256(source).hex().substr(0, 16); }

json to_json(const Record& r) {
  json j;
  j["schema"] = kRecordSchema;
  j["key"] = r.key;
  j["direct"] = r.direct;
  j["source"] = r.source;
  j["output"] = r.output;
  j["toolchain"] = r.toolchain;
  j["created_ns"] = r.created_ns;
  j["fields"] = json::array();
  for (const auto& [name, value] : r.fields) j["fields"].push_back(json::array({name, value}));
  j["files"] = json::array();
  for (const auto& f : r.files) j["files"].push_back(json::array({f.key_path, f.path, f.digest}));
  j["system_headers"] = r.system_headers;
  if (!r.stages.empty()) j["stages"] = r.stages;
  if (!r.computed_include_in.empty()) j["computed_include_in"] = r.computed_include_in;
  if (!r.stored_for.empty()) {
    j["stored_for"] = json::array();
    for (const auto& [what, path] : r.stored_for) j["stored_for"].push_back(json::array({what, path}));
  }
  return j;
}

// The *.json entries of one directory below the cache dir, read through its descriptor (a directory
// others replaced by a link is none): (mtime, name) of each record or link to one, oldest first, and
// the names of links whose record is gone.
struct RecordListing {
  std::vector<std::pair<std::int64_t, std::string>> live;
  std::vector<std::string> dangling;
};
RecordListing list_records(int dir_fd) {
  RecordListing out;
  DIR* d = ::fdopendir(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || !name.ends_with(".json")) continue;
    struct stat st {};
    if (::fstatat(dir_fd, e->d_name, &st, 0) == 0) {  // stat only: nothing is opened or written there
      if (!S_ISDIR(st.st_mode)) out.live.emplace_back(st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec, name);
    } else if (errno == ENOENT) {
      out.dangling.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(out.live.begin(), out.live.end());
  return out;
}

// The records (their paths) in explain/<dir_name>, oldest first.
std::vector<std::string> record_files(const std::string& cache_dir, const std::string& dir_name) {
  std::vector<std::string> out;
  const std::string rel_dir = "explain/" + dir_name;
  const util::UniqueFd dir = util::Beneath(cache_dir).open_directory(rel_dir);
  if (dir.get() < 0) return out;
  for (const auto& [mtime, name] : list_records(dir.get()).live) out.push_back(util::join_path(cache_dir, rel_dir + "/" + name));
  return out;
}

// The directory that links the records of one source wherever its checkout lies: named by the source as
// keyed (below a root: the root's fixed name) and its content, so two checkouts of one revision meet.
std::string portable_dir_name(const compiler::CompileJob& job, const std::string& source_digest) {
  return "p-" + util::sha256("portable\n" + job.roots.key_form(job.source) + "\n" + source_digest).hex().substr(0, 16);
}

// Field-by-field differences. Fields that repeat ("arg", "root") are compared as lists: values only
// on one side are reported one by one, and the same values in another order as the order.
std::vector<Difference> field_differences(const Fields& was, const Fields& now) {
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> a, b;
  for (const auto* side : {&was, &now}) {
    for (const auto& [name, value] : *side) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      (side == &was ? a : b)[name].push_back(value);
    }
  }
  std::vector<Difference> out;
  for (const auto& name : names) {
    const auto& x = a[name];
    const auto& y = b[name];
    if (x == y) continue;
    if (x.size() == 1 && y.size() == 1) {
      out.push_back({name, "", x[0], y[0]});
      continue;
    }
    std::vector<std::string> only_x = x, only_y;
    for (const auto& v : y) {
      auto it = std::find(only_x.begin(), only_x.end(), v);
      if (it != only_x.end())
        only_x.erase(it);
      else
        only_y.push_back(v);
    }
    for (const auto& v : only_x) out.push_back({name, "", v, std::nullopt});
    for (const auto& v : only_y) out.push_back({name, "", std::nullopt, v});
    if (only_x.empty() && only_y.empty()) {
      out.push_back(
          {name + " (order)", "", fmt::format("{}", fmt::join(x, " ")), fmt::format("{}", fmt::join(y, " "))});
    }
  }
  return out;
}

// A path without its "." components: "inc/./h.h" and "./h.h" name the file "inc/h.h" and "h.h" name, as
// the kernel resolves them ("..", which a symlink changes, is kept).
std::string without_dot_components(const std::string& path) {
  std::string out = path.starts_with('/') ? "/" : "";
  for (std::size_t start = 0; start < path.size();) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part(path.data() + start, slash - start);
    if (!part.empty() && part != ".") {
      if (!out.empty() && out.back() != '/') out += '/';
      out.append(part);
    }
    start = slash + 1;
  }
  return out;
}

// The header differences, one per file: nvcc's dependency file lists a header included as "h.h" and
// as "./h.h" twice, and the record keeps both spellings.
std::vector<Difference> one_per_file(std::vector<Difference> diffs) {
  std::set<std::string> seen;
  std::erase_if(diffs, [&](const Difference& d) { return !seen.insert(without_dot_components(d.path)).second; });
  return diffs;
}

std::vector<Difference> file_differences(const Record& entry, const std::vector<RecordedFile>* now_files,
                                         const DigestNow& digest_now) {
  std::vector<Difference> out;
  for (const auto& f : entry.files) {
    if (f.path == entry.source) continue;  // the source-content field covers it
    std::optional<std::string> now;
    std::string path = f.path;
    if (now_files) {
      auto it = std::find_if(now_files->begin(), now_files->end(),
                             [&](const RecordedFile& n) { return n.key_path == f.key_path; });
      if (it != now_files->end()) {
        now = it->digest;
        path = it->path;
      } else if (digest_now) {
        // Recorded but not read now (a __has_include target the record watches): its content decides.
        std::tie(path, now) = digest_now(f);
      }
    } else {
      std::tie(path, now) = digest_now(f);
    }
    if (now != f.digest) out.push_back({"header", path, f.digest, now});
  }
  if (now_files) {
    for (const auto& n : *now_files) {
      if (n.path == entry.source) continue;
      if (std::none_of(entry.files.begin(), entry.files.end(),
                       [&](const RecordedFile& f) { return f.key_path == n.key_path; })) {
        out.push_back({"header", n.path, std::nullopt, n.digest});
      }
    }
  }
  return one_per_file(std::move(out));
}

// The entry's ties to its checkout against this compile's: each that differs is why it misses here.
std::vector<Difference> stored_for_differences(const StoredFor& was, const StoredFor& now) {
  std::vector<Difference> out;
  for (const auto& [what, path] : was) {
    const auto it = std::find_if(now.begin(), now.end(), [&](const auto& n) { return n.first == what; });
    const std::optional<std::string> here = it == now.end() ? std::nullopt : std::optional(it->second);
    if (here != path) out.push_back({"stored-for", what, path, here});
  }
  return out;
}

std::string every_root(const core::PathRoots& roots) {
  std::string all;
  for (const auto& r : roots.roots()) all += (all.empty() ? "" : " ") + r.path;
  return all;
}

}  // namespace

std::string explain_root(const std::string& cache_dir) { return util::join_path(cache_dir, "explain"); }

namespace {

// A record's text: the file at `path` below the cache dir, or the record one of record()'s links names
// (relative, and resolved below the cache dir again: a link others planted leads nowhere outside it).
// Read through util::Beneath, so a FIFO never waits and no other link is followed. nullopt when refused.
std::optional<std::string> record_text(const std::string& cache_dir, const std::string& path) {
  constexpr std::size_t kMaxRecordBytes = 4u << 20;  // a few KiB each
  const util::Beneath cache(cache_dir);
  auto relative = cache.relative(path);
  if (!relative) return std::nullopt;
  const auto st = cache.lstat(*relative);
  if (st && S_ISLNK(st->st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0 || target[0] == '/') return std::nullopt;
    relative = cache.relative(util::lexically_normal(util::dirname(*relative) + "/" + std::string(target, n)));
    if (!relative) return std::nullopt;
  }
  return cache.read_regular(*relative, nullptr, kMaxRecordBytes);
}

}  // namespace

std::optional<Record> read_record(const std::string& cache_dir, const std::string& path) {
  try {
    const std::optional<std::string> text = record_text(cache_dir, path);
    // A record nests three deep; a deeper file is damage, never handed to the recursive parser.
    if (!text || !util::json_nesting_within(*text, 8)) return std::nullopt;
    const json j = json::parse(*text);
    if (j.value("schema", "") != kRecordSchema) return std::nullopt;
    Record r;
    r.key = j.at("key").get<std::string>();
    r.direct = j.at("direct").get<std::string>();
    r.source = j.at("source").get<std::string>();
    r.output = j.at("output").get<std::string>();
    r.toolchain = j.at("toolchain").get<std::string>();
    r.created_ns = j.at("created_ns").get<std::int64_t>();
    for (const auto& f : j.at("fields")) r.fields.emplace_back(f.at(0).get<std::string>(), f.at(1).get<std::string>());
    for (const auto& f : j.at("files")) {
      r.files.push_back({f.at(0).get<std::string>(), f.at(1).get<std::string>(), f.at(2).get<std::string>()});
    }
    r.system_headers = j.value("system_headers", "");
    if (j.contains("stages")) r.stages = j.at("stages").get<std::vector<std::string>>();
    r.computed_include_in = j.value("computed_include_in", "");
    if (j.contains("stored_for")) {
      for (const auto& t : j.at("stored_for")) r.stored_for.emplace_back(t.at(0).get<std::string>(), t.at(1).get<std::string>());
    }
    r.file = path;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // damaged or foreign: not a record
  }
}

std::vector<Record> records_for(const std::string& cache_dir, const std::string& source) {
  std::vector<Record> out;
  for (const auto& path : record_files(cache_dir, source_dir_name(source))) {
    if (auto r = read_record(cache_dir, path); r && r->source == source) out.push_back(std::move(*r));
  }
  return out;
}

void say_computed_include(Verdict& v, const std::string& file) {
  v.status = "computed-include";
  v.computed_include_in = file;
}

void compare(Verdict& v, const std::vector<Record>& candidates, const Fields& now_fields,
             const std::vector<RecordedFile>* now_files, const DigestNow& digest_now,
             const std::string& system_headers_now, const StoredForNow& stored_for_now) {
  v.records = candidates.size();
  std::optional<std::size_t> best;
  std::vector<Difference> best_diffs;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Record& c = candidates[i];
    std::vector<Difference> diffs = field_differences(c.fields, now_fields);
    auto files = file_differences(c, now_files, digest_now);
    diffs.insert(diffs.end(), files.begin(), files.end());
    auto ties = stored_for_differences(c.stored_for, stored_for_now(c));
    diffs.insert(diffs.end(), ties.begin(), ties.end());
    // Known on both sides only with a listing: --last, or --closure.
    if (!system_headers_now.empty() && !c.system_headers.empty() && c.system_headers != system_headers_now) {
      diffs.push_back({"system-headers", "", c.system_headers, system_headers_now});
    }
    bool better = !best;
    if (best) {
      const Record& b = candidates[*best];
      const auto key = [&](const Record& r, std::size_t n) {
        return std::make_tuple(n, r.output == v.output ? 0 : 1, -r.created_ns);
      };
      better = key(c, diffs.size()) < key(b, best_diffs.size());
    }
    if (better) {
      best = i;
      best_diffs = std::move(diffs);
    }
  }
  if (!best) return;
  v.closest = candidates[*best];
  v.differences = std::move(best_diffs);
  if (v.stored_for.empty()) v.stored_for = stored_for_now(*v.closest);
  if (v.differences.empty() && !v.closest->computed_include_in.empty()) {
    say_computed_include(v, v.closest->computed_include_in);
  } else if (v.differences.empty()) {
    v.status = "match";
    v.message =
        "no difference: this compile has the key fields and headers of a recorded entry, so a lookup "
        "finds it, unless a new header now shadows a recorded one (--closure lists them) or the entry "
        "was evicted or removed (kache -C) since.";
  } else {
    v.status = "differs";
    v.message = fmt::format("differs from it in {} field{} (entry -> now):", v.differences.size(),
                            v.differences.size() == 1 ? "" : "s");
  }
}

std::string path_now(const core::PathRoots& roots, const std::string& key_path) {
  for (const auto& r : roots.roots()) {
    if (key_path == r.name) return r.path;
    if (key_path.starts_with(r.name + "/")) return r.path + key_path.substr(r.name.size());
  }
  return key_path;
}

StoredFor stored_for_here(const StoredFor& recorded, const compiler::CompileJob& job) {
  StoredFor now;
  for (const auto& [what, path] : recorded) {
    if (what == "source") {
      now.emplace_back(what, real_source_path(job));
    } else if (what == kExpandedTie) {
      now.emplace_back(what, path);  // why the roots are tied, not a path of the build
    } else if (what == "every root") {
      now.emplace_back(what, every_root(job.roots));
    } else if (path_now(job.roots, what) != what) {
      now.emplace_back(what, path_now(job.roots, what));
    }
  }
  return now;
}

namespace {

// Links explain/<dir_name>/<name> to a record stored at target (relative to the cache dir): relative,
// so the cache dir can move. Replaces an older link atomically. The directory is created and opened
// below the cache dir (a link others planted there is refused, never written through). Then prunes the
// directory: links beyond the newest kRecordsPerSource, and links whose record was evicted with its
// entry (the store removes the record, not the link).
void link_and_prune(const util::Beneath& cache, const std::string& target, const std::string& dir_name,
                    const std::string& name) {
  const std::string rel_dir = "explain/" + dir_name;
  std::string refused;
  if (!cache.create_directories(rel_dir, 0777, &refused)) throw std::runtime_error(rel_dir + " is " + refused);
  const util::UniqueFd dir = cache.open_directory(rel_dir, &refused);
  if (dir.get() < 0) throw std::runtime_error(rel_dir + " is " + refused);
  const std::string tmp = name + ".tmp";
  ::unlinkat(dir.get(), tmp.c_str(), 0);
  if (::symlinkat(("../../" + target).c_str(), dir.get(), tmp.c_str()) != 0) {
    throw std::system_error(errno, std::generic_category(), "symlink " + rel_dir + "/" + tmp);
  }
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    throw std::system_error(err, std::generic_category(), "rename " + rel_dir + "/" + tmp);
  }
  const RecordListing listing = list_records(dir.get());
  for (std::size_t i = 0; i + kRecordsPerSource < listing.live.size(); ++i) {
    ::unlinkat(dir.get(), listing.live[i].second.c_str(), 0);
  }
  for (const auto& gone : listing.dangling) ::unlinkat(dir.get(), gone.c_str(), 0);
}

}  // namespace

void record(const std::string& cache_dir, const compiler::CompileJob& job, const std::string& direct_key,
            const std::string& storage_key, const std::vector<ManifestFile>& files,
            const std::vector<std::string>& stages, const StoredFor& stored_for,
            const StoreRecord& store_record, const std::string& computed_include_in) noexcept {
  if (cache_dir.empty()) return;
  try {
    Record r;
    r.key = storage_key;
    r.direct = direct_key;
    r.source = job.source;
    r.output = job.output;
    r.toolchain = job.description;
    r.created_ns = util::now_ns();
    r.fields = recorded_fields(job.key_fields);
    r.fields.emplace_back("source-content", util::hash_file(job.source).hex());
    ClosureSplit split(job.system_dirs);
    for (const auto& f : files) {
      RecordedFile rf{job.roots.key_form(f.path), job.roots.join(f.path), f.hash.hex()};
      if (!split.add(rf)) r.files.push_back(std::move(rf));
    }
    r.system_headers = split.finish();
    r.stages = stages;
    r.stored_for = stored_for;
    r.computed_include_in = computed_include_in;
    const std::string stored = store_record(to_json(r).dump());
    if (!stored.starts_with(cache_dir + "/")) return;
    const std::string dir_name = source_dir_name(job.source);
    const std::string target = stored.substr(cache_dir.size() + 1);
    const util::CacheUmaskScope umask;  // the records live in the cache dir, shared like its entries
    const util::Beneath cache(cache_dir);
    link_and_prune(cache, target, dir_name, storage_key + ".json");
    if (!cache.write_atomic("explain/last", dir_name + "/" + storage_key + ".json"))
      core::log().debug("cannot write explain/last: explain/ is no directory of the cache dir");
    // Linked by the checkout-independent name too: a miss in another checkout finds this entry (kache report).
    link_and_prune(cache, target, portable_dir_name(job, r.fields.back().second), storage_key + ".json");
  } catch (const std::exception& e) {
    core::log().debug("cannot write the explain record: {}", e.what());
  }
}

Fields recorded_fields(const Fields& key_fields) {
  Fields out;
  for (std::size_t i = 0; i < key_fields.size(); ++i) {
    const auto& [name, value] = key_fields[i];
    if (name != "arg") {
      out.emplace_back(name, value);
      continue;
    }
    // "-D" "API_KEY=..." as one definition, so that it is named (-DAPI_KEY) and its value digested.
    const bool split_define = (value == "-D" || value == "--define-macro") && i + 1 < key_fields.size() &&
                              key_fields[i + 1].first == "arg";
    if (split_define) {
      out.emplace_back(name, compiler::without_define_values("-D" + key_fields[++i].second));
    } else {
      out.emplace_back(name, compiler::without_define_values(value));
    }
  }
  return out;
}

std::string real_source_path(const compiler::CompileJob& job) {
  char real[PATH_MAX];
  return ::realpath(job.source.c_str(), real) != nullptr ? std::string(real) : job.source;
}

StoredFor ties_of(const ManifestEntry& entry, const compiler::CompileJob& job, const std::string& expanded) {
  StoredFor ties;
  if (!expanded.empty()) ties.emplace_back(std::string(kExpandedTie), expanded);
  for (const auto& name : entry.object_roots) ties.emplace_back(name, path_now(job.roots, name));
  if (entry.path_specific) ties.emplace_back("source", real_source_path(job));
  if (entry.checkout_specific) ties.emplace_back("every root", every_root(job.roots));
  return ties;
}

namespace {

bool is_define(const std::optional<std::string>& v) { return v && compiler::defines_macro(*v); }

// The name of an argument that differs, never its value: a value given as its own word ("-I" "/w/inc")
// is named by the flag before it in either side's fields.
std::string argument_named(const std::string& value, const std::array<const Fields*, 2>& sides) {
  const std::string name = compiler::argument_name(value);
  if (value.starts_with('-')) return name;
  for (const Fields* fields : sides) {
    for (std::size_t i = 1; fields && i < fields->size(); ++i) {
      const auto& before = (*fields)[i - 1];
      if ((*fields)[i] == std::pair<std::string, std::string>("arg", value) && before.first == "arg" &&
          before.second.starts_with('-')) {
        return compiler::argument_name(before.second);
      }
    }
  }
  return name;
}

// The difference that says most about why the compile missed, as a cause (core/reasons.hpp).
Cause cause_of(const std::vector<Difference>& diffs, const std::array<const Fields*, 2>& sides) {
  static constexpr std::string_view kOrder[] = {cause::kToolchainChanged, cause::kPerCheckoutEntry,
                                                cause::kVolatileDefine,
                                                cause::kEnvironmentChanged, cause::kFlagsChanged,
                                                cause::kSourceChanged, cause::kHeaderChanged};
  std::vector<Cause> found;
  for (const auto& d : diffs) {
    const std::string value = d.now.value_or(d.was.value_or(""));
    if (d.field == "toolchain") {
      found.push_back({std::string(cause::kToolchainChanged), d.now.value_or("")});
    } else if (d.field == "stored-for") {  // the entry is stored for another checkout's paths
      found.push_back({std::string(cause::kPerCheckoutEntry), d.path});
    } else if (d.field == "arg" && (is_define(d.was) || is_define(d.now))) {
      found.push_back({std::string(cause::kVolatileDefine), argument_named(value, sides)});
    } else if (d.field.starts_with("env:") || d.field.starts_with("NVCC_")) {
      found.push_back({std::string(cause::kEnvironmentChanged), d.field});
    } else if (d.field == "source-content") {
      found.push_back({std::string(cause::kSourceChanged), ""});
    } else if (d.field == "header") {
      found.push_back({std::string(cause::kHeaderChanged), d.path});
    } else {
      // The flag's name, never its value (the log holds no argument value).
      found.push_back({std::string(cause::kFlagsChanged), d.field == "arg" ? argument_named(value, sides) : d.field});
    }
  }
  for (const std::string_view name : kOrder) {
    for (const auto& c : found) {
      if (c.name == name) return c;
    }
  }
  return {std::string(cause::kEntryGone), ""};
}

// The records of the same source (as keyed, and the same content) in other checkouts.
std::vector<Record> records_elsewhere(const std::string& cache_dir, const compiler::CompileJob& job,
                                      const std::string& source_digest) {
  std::vector<Record> out;
  for (const auto& path : record_files(cache_dir, portable_dir_name(job, source_digest))) {
    if (auto r = read_record(cache_dir, path); r && r->source != job.source) out.push_back(std::move(*r));
  }
  return out;
}

// A miss against another checkout's entry of the same source: an absolute path that differs is a path
// keyed per checkout; no difference at all, an entry stored for that checkout only.
std::optional<Cause> cause_elsewhere(const std::vector<Difference>& diffs, const std::array<const Fields*, 2>& sides) {
  if (diffs.empty()) return Cause{std::string(cause::kPerCheckoutEntry), "stored for another checkout"};
  // A list field: the other checkout's path as "was" alone, this one's as "now" alone (named first).
  // Two passes, not std::stable_partition (libstdc++ 12's buffer for it is deprecated under clang 19).
  std::vector<Difference> ordered;
  for (const bool with_now : {true, false}) {
    for (const auto& d : diffs) {
      if (d.now.has_value() == with_now) ordered.push_back(d);
    }
  }
  for (const auto& d : ordered) {
    const std::string value = d.now.value_or(d.was.value_or(""));
    const std::size_t slash = value.find('/');
    const bool absolute = slash != std::string::npos && (slash == 0 || value[slash - 1] == '=' ||
                                                         value.compare(0, slash, "-I") == 0 ||
                                                         value.compare(0, slash, "-isystem") == 0);
    if (d.field == "arg" && absolute && value.find("/kache/") == std::string::npos) {
      return Cause{std::string(cause::kAbsolutePath), argument_named(value, sides)};
    }
  }
  return std::nullopt;
}

// A per-checkout miss against an entry whose roots a path expansion tied is named for that expansion.
Cause named_for_expansion(Cause c, const Verdict& v) {
  if (c.name != cause::kPerCheckoutEntry || !v.closest) return c;
  for (const auto& [what, path] : v.closest->stored_for) {
    if (what == kExpandedTie) return {std::string(cause::kExpandedPath), path};
  }
  return c;
}

}  // namespace

Cause miss_cause(const std::string& cache_dir, const compiler::CompileJob& job, const std::string& source_digest,
                 const std::vector<ManifestFile>& files, bool preprocessed_lookup) noexcept {
  try {
    std::vector<Record> records = records_for(cache_dir, job.source);
    const bool elsewhere = records.empty();
    if (elsewhere) records = records_elsewhere(cache_dir, job, source_digest);
    if (records.empty()) return {std::string(cause::kNewSource), ""};
    Fields now = recorded_fields(job.key_fields);
    now.emplace_back("source-content", source_digest);
    std::vector<RecordedFile> now_files;
    for (const auto& f : files) now_files.push_back({job.roots.key_form(f.path), job.roots.join(f.path), f.hash.hex()});
    Verdict v;
    v.output = job.output;
    compare(v, records, now, &now_files, nullptr, "",
            [&](const Record& r) { return stored_for_here(r.stored_for, job); });
    const std::array<const Fields*, 2> sides = {&now, v.closest ? &v.closest->fields : nullptr};
    if (elsewhere) {
      if (auto c = cause_elsewhere(v.differences, sides)) return named_for_expansion(*c, v);
    }
    // An entry no lookup can find: what its other headers did since does not matter. The file with the
    // computed name edited (perhaps to a literal #include) is a header change, not this cause.
    const std::string computed = v.closest ? v.closest->computed_include_in : "";
    const bool only_other_headers = std::all_of(v.differences.begin(), v.differences.end(), [&](const Difference& d) {
      return (d.field == "header" && d.path != computed) || d.field == "system-headers";
    });
    if (!computed.empty() && only_other_headers && !preprocessed_lookup) {
      return {std::string(cause::kComputedInclude), v.closest->computed_include_in};
    }
    return named_for_expansion(cause_of(v.differences, sides), v);
  } catch (const std::exception& e) {
    core::log().debug("cannot compare with the explain records: {}", e.what());
    return {std::string(cause::kNewSource), ""};
  }
}

}  // namespace kache::engine::explain
