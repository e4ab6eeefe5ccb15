#include "compiler/gcc/driver_probe.hpp"

#include <sstream>
#include <stdexcept>

#include "util/fs.hpp"

namespace kache::compiler::gcc {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

namespace {

std::vector<std::string> question(const std::string& driver, const std::vector<std::string>& options,
                                  std::initializer_list<std::string> asked) {
  std::vector<std::string> argv = {driver};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), asked.begin(), asked.end());
  return argv;
}

}  // namespace

DriverPrograms::DriverPrograms(const std::string& driver, const util::Environment& env,
                               std::initializer_list<const char*> programs, const std::vector<std::string>& options) {
  // A driver of the same version over another back end keys apart.
  for (const char* prog : programs) {
    answers_.emplace_back(prog,
                          start_capture(driver, question(driver, options, {std::string("-print-prog-name=") + prog}), env));
  }
}

void DriverPrograms::add_to(ProbeFiles& files) {
  for (auto& [prog, answer] : answers_) {
    const util::ProcessResult r = answer.get();
    // A question the driver cannot answer leaves its passes unknown: no memo of partial facts.
    if (!r.ok()) throw std::runtime_error("the host compiler's -print-prog-name=" + prog + " failed");
    std::string path = first_line(r.out);
    if (path.empty()) throw std::runtime_error("the host compiler named no program for -print-prog-name=" + prog);
    if (path.find('/') == std::string::npos && prog.starts_with("cc1")) continue;
    path = files.resolve(path);
    if (!path.empty()) files.add_program("host:" + prog, path);
  }
}

DriverIncludeDirs::DriverIncludeDirs(const std::string& driver, std::string_view language, const util::Environment& env,
                                     const std::vector<std::string>& options)
    : answer_(start_capture(
          driver, question(driver, options, {"-E", "-x", std::string(language), "-v", "/dev/null", "-o", "/dev/null"}),
          env)) {}

std::vector<std::string> DriverIncludeDirs::get() {
  const util::ProcessResult hs = answer_.get();
  // Without its search list, headers appearing in the driver's own directories would go unwatched.
  if (!hs.ok() || hs.err.find("#include <...> search starts here:") == std::string::npos)
    throw std::runtime_error("the host compiler's -E -v did not list its include directories");
  std::vector<std::string> dirs;
  std::istringstream err(hs.err);
  std::string line;
  bool in_list = false;
  while (std::getline(err, line)) {
    if (line.starts_with("#include <...> search starts here:")) {
      in_list = true;
      continue;
    }
    if (line.starts_with("End of search list.")) break;
    if (in_list && line.size() > 1 && line[0] == ' ') {
      std::string dir = line.substr(1);
      if (auto p = dir.find(" (framework directory)"); p != std::string::npos) dir.resize(p);
      dirs.push_back(util::lexically_normal(dir));
    }
  }
  return dirs;
}

}  // namespace kache::compiler::gcc
