// The floors of src/ (ARCHITECTURE.md): util <- core <- compiler, storage, remote_exec <- engine <- commands
// <- main.cpp/manual.cpp. A file includes its own folder and the floors below its own, never one above or
// beside it: compiler, storage and remote_exec share a floor and do not include each other, and the engine
// never includes a command. Every #include "folder/..." under src/ is
// read, so an include that climbs fails here, whoever adds it.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The floor of each folder of src/; the files at src/ itself (main.cpp, manual.cpp) are the top floor.
const std::map<std::string, int> kFloors = {
    {"util", 0}, {"core", 1}, {"compiler", 2}, {"storage", 2}, {"remote_exec", 2}, {"engine", 3}, {"commands", 4},
};
constexpr int kTopFloor = 5;

// "file:line: text" for every include under root that names a folder other than its own on a floor
// not below its own, and for every file in a folder that has no floor.
std::vector<std::string> climbing_includes(const fs::path& root) {
  const std::regex include_line(R"re(^\s*#\s*include\s*"([^"/]+)/)re");
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const fs::path rel = e.path().lexically_relative(root);
    const std::string folder = rel.has_parent_path() ? rel.begin()->string() : std::string();
    const auto own = kFloors.find(folder);
    if (!folder.empty() && own == kFloors.end()) {
      found.push_back(rel.string() + ": the folder " + folder + " has no floor");
      continue;
    }
    const int floor = folder.empty() ? kTopFloor : own->second;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string target = m[1];
      if (target == folder) continue;
      const auto to = kFloors.find(target);
      if (to != kFloors.end() && to->second < floor) continue;
      found.push_back(rel.string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  return found;
}

// The seams above the floors (ARCHITECTURE.md): which headers of a lower room a folder may include.
// Commands reach compilers and stores only through their interfaces; the engine and the top floor never
// name an adapter's own folder or a backend's (a new compiler or store needs no edit above its floor);
// kache-reapi's folder (remote_exec/grpc/) is included from nowhere else.
struct SeamRule {
  std::string from;                   // a folder of src/ ("" = the top floor's files)
  std::string to;                     // the included path's prefix ("compiler/")
  std::vector<std::string> allowed;   // the headers below `to` it may include; empty with `subfolders`
  bool subfolders_only = false;       // true: only `to`'s own files, none of its subfolders
};
const std::vector<SeamRule> kSeamRules = {
    {"commands", "compiler/", {"compiler/adapter.hpp", "compiler/registry.hpp"}},
    {"commands", "storage/", {"storage/storage.hpp", "storage/open.hpp"}},
    {"commands", "remote_exec/", {"remote_exec/client.hpp", "remote_exec/wire.hpp"}},
    {"engine", "compiler/", {}, true},
    {"engine", "storage/", {}, true},
    {"engine", "remote_exec/", {}, true},
    {"", "compiler/", {}, true},
    {"", "storage/", {}, true},
};

std::string folder_of(const fs::path& rel) { return rel.has_parent_path() ? rel.begin()->string() : std::string(); }

// "file:line: text" for every include under root that passes around a seam of kSeamRules, and for every
// include of remote_exec/grpc/ from outside that folder.
std::vector<std::string> seam_bypasses(const fs::path& root) {
  const std::regex include_line(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const fs::path rel = e.path().lexically_relative(root);
    const std::string folder = folder_of(rel);
    const bool in_grpc = rel.string().starts_with("remote_exec/grpc/");
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string target = m[1];
      bool bypass = !in_grpc && target.starts_with("remote_exec/grpc/");
      for (const auto& r : kSeamRules) {
        if (r.from != folder || !target.starts_with(r.to)) continue;
        const bool nested = target.find('/', r.to.size()) != std::string::npos;
        if (r.subfolders_only ? nested : std::find(r.allowed.begin(), r.allowed.end(), target) == r.allowed.end())
          bypass = true;
      }
      if (bypass) found.push_back(rel.string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  return found;
}

// A source file's code with its comments dropped, and the string literals in it apart (escapes kept as
// written). Enough of C++'s lexing for kache's own sources, which hold no raw strings in core/.
struct Code {
  std::string text;
  std::vector<std::string> literals;
};

Code read_code(const std::string& source) {
  Code code;
  for (std::size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '/' && source.compare(i, 2, "//") == 0) {
      i = source.find('\n', i);
      if (i == std::string::npos) break;
      code.text += '\n';
    } else if (c == '/' && source.compare(i, 2, "/*") == 0) {
      i = source.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (c == '"' || c == '\'') {
      std::size_t end = i + 1;
      while (end < source.size() && source[end] != c) end += source[end] == '\\' ? 2 : 1;
      if (c == '"') code.literals.push_back(source.substr(i + 1, end - i - 1));
      code.text += ' ';
      i = end;
    } else {
      code.text += c;
    }
  }
  return code;
}

// What in src/core/ would be a scheme's knowledge: a scheme's name or one of its attributes as a literal,
// an attribute written with its value, or the types of one backend's attributes. "file" and "layout" are
// common words of core's own (log.file, a depfile's layout), so only their attribute forms count.
std::vector<std::string> scheme_knowledge(const fs::path& core_dir) {
  static const std::vector<std::string> kNames = {"redis",  "redis+unix", "http",       "https",    "s3",
                                                  "region", "endpoint",   "addressing", "max-size", "db"};
  static const std::vector<std::string> kForms = {
      "region=", "endpoint=", "addressing=", "layout=", "max-size=", "db=", "amazonaws"};
  const std::regex kTypes(R"re(\b(HttpLayout|S3Addressing|is_redis|is_http|Scheme::\w+)\b)re");
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(core_dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    const Code code = read_code(std::string(std::istreambuf_iterator<char>(in), {}));
    const std::string file = e.path().filename().string();
    for (const std::string& literal : code.literals) {
      const bool named = std::find(kNames.begin(), kNames.end(), literal) != kNames.end();
      const bool form = std::any_of(kForms.begin(), kForms.end(),
                                    [&](const std::string& f) { return literal.find(f) != std::string::npos; });
      if (named || form) found.push_back(file + ": \"" + literal + "\"");
    }
    for (std::sregex_iterator m(code.text.begin(), code.text.end(), kTypes), end; m != end; ++m) {
      found.push_back(file + ": " + m->str());
    }
  }
  return found;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(Floors, NoIncludeInSrcClimbs) {
  const auto found = climbing_includes(fs::path(KACHE_SOURCE_DIR) / "src");
  std::string all;
  for (const auto& f : found) all += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "includes that climb a floor (util <- core <- compiler, storage, remote_exec <- engine <- commands <- main):"
                             << all;
}

TEST(Floors, NoIncludePassesAroundASeam) {
  const auto found = seam_bypasses(fs::path(KACHE_SOURCE_DIR) / "src");
  std::string all;
  for (const auto& f : found) all += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "includes that pass around a seam (commands reach compiler/ and storage/ through "
                                "adapter.hpp, registry.hpp, storage.hpp and open.hpp; the engine names no "
                                "adapter's or backend's folder; remote_exec/grpc/ is kache-reapi's own):"
                             << all;
}

// The seam check itself: each kind of bypass planted is found, and the allowed includes are not.
TEST(Floors, PlantedSeamBypassesAreFound) {
  std::string dir = (fs::temp_directory_path() / "kache-seams-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const fs::path root = dir;
  write(root / "commands/a.cpp", "#include \"compiler/registry.hpp\"\n#include \"compiler/nvcc/doctor.hpp\"\n"
                                 "#include \"storage/open.hpp\"\n#include \"storage/remote/file_storage.hpp\"\n");
  write(root / "engine/a.cpp", "#include \"compiler/job_paths.hpp\"\n#include \"compiler/gcc/plan.hpp\"\n"
                               "#include \"storage/layered.hpp\"\n#include \"storage/local/local_storage.hpp\"\n");
  write(root / "engine/b.cpp", "#include \"remote_exec/grpc/worker.hpp\"\n");
  write(root / "remote_exec/grpc/main.cpp", "#include \"remote_exec/grpc/worker.hpp\"\n");
  write(root / "main.cpp", "#include \"compiler/registry.hpp\"\n#include \"compiler/gcc/flag_table.hpp\"\n");
  auto found = seam_bypasses(root);
  std::sort(found.begin(), found.end());
  fs::remove_all(root);
  EXPECT_EQ(found, (std::vector<std::string>{
                       "commands/a.cpp:2: #include \"compiler/nvcc/doctor.hpp\"",
                       "commands/a.cpp:4: #include \"storage/remote/file_storage.hpp\"",
                       "engine/a.cpp:2: #include \"compiler/gcc/plan.hpp\"",
                       "engine/a.cpp:4: #include \"storage/local/local_storage.hpp\"",
                       "engine/b.cpp:1: #include \"remote_exec/grpc/worker.hpp\"",
                       "main.cpp:2: #include \"compiler/gcc/flag_table.hpp\"",
                   }));
}

// The check itself: a planted include of each kind that climbs is found, and the allowed ones are not.
TEST(Floors, PlantedClimbingIncludesAreFound) {
  std::string dir = (fs::temp_directory_path() / "kache-floors-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const fs::path root = dir;
  write(root / "util/a.hpp", "#include \"util/b.hpp\"\n");                                         // its own folder
  write(root / "core/a.cpp", "#include \"util/a.hpp\"\n#include \"storage/remote/x.hpp\"\n");      // up
  write(root / "compiler/nvcc/a.cpp", "#include \"core/a.hpp\"\n  #include \"storage/s.hpp\"\n");  // beside
  write(root / "storage/a.cpp", "#include \"engine/pipeline.hpp\"\n");                                // up
  write(root / "engine/a.cpp", "#include \"compiler/a.hpp\"\n#include \"storage/a.hpp\"\n#include \"manual.hpp\"\n");
  write(root / "engine/b.cpp", "#include \"commands/cli.hpp\"\n");                                  // up
  write(root / "remote_exec/a.cpp", "#include \"storage/storage.hpp\"\n");                          // beside
  write(root / "commands/a.cpp", "#include \"engine/a.hpp\"\n#include \"remote_exec/a.hpp\"\n");
  write(root / "main.cpp", "#include \"commands/a.hpp\"\n#include \"engine/a.hpp\"\n#include \"util/a.hpp\"\n");
  write(root / "attic/a.cpp", "#include \"util/a.hpp\"\n");  // a folder with no floor
  auto found = climbing_includes(root);
  std::sort(found.begin(), found.end());
  fs::remove_all(root);
  EXPECT_EQ(found, (std::vector<std::string>{
                       "attic/a.cpp: the folder attic has no floor",
                       "compiler/nvcc/a.cpp:2:   #include \"storage/s.hpp\"",
                       "core/a.cpp:2: #include \"storage/remote/x.hpp\"",
                       "engine/b.cpp:1: #include \"commands/cli.hpp\"",
                       "remote_exec/a.cpp:1: #include \"storage/storage.hpp\"",
                       "storage/a.cpp:1: #include \"engine/pipeline.hpp\"",
                   }));
}

// Issue 40: core/ keeps the generic URL; a scheme's form and attributes are its backend's (storage/remote).
TEST(Floors, CoreNamesNoStorageScheme) {
  const auto found = scheme_knowledge(fs::path(KACHE_SOURCE_DIR) / "src/core");
  std::string all;
  for (const auto& f : found) all += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "scheme knowledge in src/core (it belongs in storage/remote's backends):" << all;
}

// The check itself: what it finds in code and literals, and what it passes over in comments.
TEST(Floors, PlantedSchemeKnowledgeIsFound) {
  std::string dir = (fs::temp_directory_path() / "kache-core-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const fs::path root = dir;
  write(root / "a.cpp",
        "// redis://h|region=x in a comment\n/* \"s3\" */ int layout = 1; const char* f = \"file\";\n"
        "bool s3(std::string_view n) { return n == \"region\" || n.starts_with(\"layout=\"); }\n"
        "HttpLayout l; char q = '\"'; auto x = \"a \\\" http\";\n");
  auto found = scheme_knowledge(root);
  std::sort(found.begin(), found.end());
  fs::remove_all(root);
  EXPECT_EQ(found, (std::vector<std::string>{"a.cpp: \"layout=\"", "a.cpp: \"region\"", "a.cpp: HttpLayout"}));
}
