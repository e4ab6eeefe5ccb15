#include "commands/worker.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <variant>
#include <fmt/format.h>

#include "commands/options.hpp"
#include "compiler/registry.hpp"
#include "engine/remote_exec.hpp"
#include "remote_exec/wire.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::commands {

namespace reapi = kache::remote_exec;

namespace {

using Status = core::DoctorStatus;

// The toolchain id a compile through the family `name` ("nvcc", "gcc") keys for program.
std::string toolchain_id(std::string_view name, const std::string& program, const util::Environment& env) {
  const auto family = compiler::family(name);
  if (!family) throw std::runtime_error("kache knows no compiler family " + std::string(name));
  return family->toolchain_id(program, env);
}

// One row of doctor's remote execution section.
core::DoctorRow remote_execution_row(std::string name, Status status, std::string value, std::string message = "",
                                     std::string fix = "") {
  return {"remote_execution", std::move(name), status, std::move(value), std::move(message), std::move(fix)};
}

// Runs /bin/true on a worker pinned to this nvcc's toolchain; a nonce keeps the ActionCache out of it.
core::DoctorRow worker_probe(reapi::Client& client, const std::string& nvcc_path) {
  std::string id;
  try {
    id = toolchain_id("nvcc", nvcc_path, util::current_environment());
  } catch (const std::exception& e) {
    return remote_execution_row("worker", Status::warn, "not asked",
                                fmt::format("{} cannot be probed: {}.", nvcc_path, e.what()));
  }
  reapi::ActionSpec probe;
  probe.arguments = {"/bin/true"};
  probe.environment = {{"kache_doctor_probe", fmt::format("{}-{}", ::getpid(), std::time(nullptr))}};
  probe.platform = {{"kache-toolchain", id}, {"OSFamily", "Linux"}};
  auto done = client.execute(probe);
  if (auto* f = std::get_if<reapi::Failure>(&done)) {
    return remote_execution_row(
        "worker", Status::warn, "none ran the probe",
        fmt::format("no worker of this toolchain ({}) ran a probe action: {} ({}); stages run here.", id.substr(0, 12),
                    f->reason, f->detail),
        "start `kache worker --nvcc " + nvcc_path + "` against the server");
  }
  const auto& o = std::get<reapi::ActionOutcome>(done);
  return remote_execution_row("worker", o.exit_code == 0 ? Status::ok : Status::warn,
                              fmt::format("{} (toolchain {})", o.worker.empty() ? "a worker" : o.worker, id.substr(0, 12)));
}

}  // namespace

std::string remote_execution_feature() {
  const std::string helper = reapi::helper_path();
  if (::access(helper.c_str(), X_OK) == 0) return "remote execution: kache-reapi (gRPC)\n";
  // Either kache was built without gRPC or kache-reapi was not copied beside it: both read the same here.
  return fmt::format("remote execution: not available (no kache-reapi beside kache at {}; it is built where "
                     "gRPC is installed)\n", helper);
}

std::vector<core::DoctorRow> check_remote_execution(const core::Config& config, const std::string& nvcc_path) {
  std::vector<core::DoctorRow> rows;
  if (config.remote_execution_server.empty()) return rows;
  reapi::ServerSettings settings = engine::remote_execution_settings(config);
  settings.timeout_s = 30;
  auto client = reapi::open_client(settings);
  auto caps = client->capabilities();
  if (auto* f = std::get_if<reapi::Failure>(&caps)) {
    rows.push_back(remote_execution_row(
        "server", Status::fail, config.remote_execution_server,
        fmt::format("{} ({}): every stage runs here (remote_fallback.{}).", f->detail, f->reason, f->reason),
        "start the server, or correct remote_execution.server, or remove it"));
    return rows;
  }
  const auto& c = std::get<reapi::Capabilities>(caps);
  rows.push_back(remote_execution_row("server", Status::ok, config.remote_execution_server + ": answers"));
  const bool usable = c.execution_enabled && c.sha256;
  rows.push_back(remote_execution_row(
      "capabilities", usable ? Status::ok : Status::fail,
      fmt::format("API {}..{}, execution {}, SHA-256 {}", c.api_low, c.api_high, c.execution_enabled ? "on" : "off",
                  c.sha256 ? "yes" : "no"),
      usable ? "" : "the server cannot execute SHA-256 actions: every stage runs here.",
      usable ? "" : "point remote_execution.server at a server with execution enabled"));
  if (usable) rows.push_back(worker_probe(*client, nvcc_path));
  return rows;
}

namespace {

// The toolchain ids a worker serves: the given one, that of an nvcc (its host compiler included) and that
// of a gcc/clang driver (whole compiles), as a compile through kache keys them. Empty after saying why
// on stderr.
std::vector<std::string> worker_toolchains(const std::string& given, const std::string& nvcc,
                                           const std::string& compiler) {
  std::vector<std::string> ids;
  if (!given.empty()) ids.push_back(given);
  const util::Environment env = util::current_environment();
  for (const std::string* path : {&nvcc, &compiler}) {
    if (path->empty()) continue;
    try {
      ids.push_back(toolchain_id(path == &nvcc ? "nvcc" : "gcc", *path, env));
    } catch (const std::exception& e) {
      fmt::print(stderr, "kache worker: {} cannot be probed: {}\n", *path, e.what());
      return {};
    }
  }
  if (ids.empty()) fmt::print(stderr, "kache worker: give --toolchain-id, --nvcc or --compiler\n");
  return ids;
}

}  // namespace

int run_worker_command(const std::vector<std::string>& args) {
  CLI::App app{"kache worker: runs a Remote Execution server's actions (docs/remote-execution.md).", "kache worker"};
  reapi::WorkerSettings s;
  std::vector<std::string> properties;
  std::string toolchain;
  std::string nvcc, compiler;
  set_help_row(app, "worker");
  add_row(app, "worker", "--server", s.server.url)->required();
  add_row(app, "worker", "--instance", s.server.instance);
  add_row(app, "worker", "--ca-file", s.server.ca_file);
  auto* id_option = add_row(app, "worker", "--toolchain-id", toolchain);
  add_row(app, "worker", "--nvcc", nvcc)->excludes(id_option);
  add_row(app, "worker", "--compiler", compiler)->excludes(id_option);
  add_row(app, "worker", "--property", properties);
  add_row(app, "worker", "--work-dir", s.work_dir)->required();
  add_row(app, "worker", "--bot-id", s.bot_id);
  add_row(app, "worker", "--max-actions", s.max_actions);
  require_every_row(app, "worker");
  std::vector<std::string> argv = {"kache worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin() + 1, argv.end());  // CLI11's vector form takes the arguments last first
  argv.erase(argv.begin());
  try {
    app.parse(argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (const char* token = std::getenv("KACHE_REMOTE_EXECUTION_BEARER_TOKEN")) s.server.bearer_token = token;
  const std::vector<std::string> toolchains = worker_toolchains(toolchain, nvcc, compiler);
  if (toolchains.empty()) return 2;
  for (const auto& id : toolchains) fmt::print("kache-worker: toolchain {}\n", id);
  std::fflush(stdout);
  if (s.bot_id.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    s.bot_id = fmt::format("{}-{}", host, ::getpid());
  }
  for (const auto& id : toolchains) s.properties.emplace_back("kache-toolchain", id);
  s.properties.emplace_back("OSFamily", "Linux");
  for (const auto& p : properties) {
    const std::size_t eq = p.find('=');
    if (eq == std::string::npos) {
      fmt::print(stderr, "kache worker: --property {} is not NAME=VALUE\n", p);
      return 2;
    }
    s.properties.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  // The worker is kache-reapi (remote_exec/wire.hpp), the program that links gRPC: kache hands over.
  const std::string helper = reapi::helper_path();
  util::exec_replace(helper, {helper, "worker", reapi::encode_worker_settings(s)}, util::current_environment());
  fmt::print(stderr, "kache worker: {} cannot be run: {}\n", helper, std::strerror(errno));
  return 2;
}


}  // namespace kache::commands
