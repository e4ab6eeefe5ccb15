#include "remote_exec/grpc/worker.hpp"

#include <build/bazel/remote/execution/v2/remote_execution.pb.h>
#include <google/devtools/remoteworkers/v1test2/bots.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <sys/stat.h>
#include <thread>

#include "remote_exec/grpc/channel.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"

namespace kache::remote_exec {

namespace re = build::bazel::remote::execution::v2;
namespace rw = google::devtools::remoteworkers::v1test2;

namespace {

// A bot session update waits on the server for work; it is renewed at this bound.
constexpr double kPollSeconds = 20;
constexpr double kBlobSeconds = 60;

// A name from the server that is to become a path below the private directory: one plain component.
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// A relative path of the command (working directory, output): no absolute path, no "..".
bool inside(const std::string& path) {
  if (path.starts_with('/')) return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (path.substr(start, slash - start) == "..") return false;
    start = slash + 1;
  }
  return true;
}

class Worker {
 public:
  Worker(const WorkerSettings& s, std::shared_ptr<grpc::Channel> channel)
      : settings_(s), channel_(std::move(channel)), bots_(rw::Bots::NewStub(channel_)) {}

  int serve() {
    rw::BotSession session = describe();
    std::uint64_t ran = 0;
    if (!create(session)) return 1;
    while (settings_.max_actions == 0 || ran < settings_.max_actions) {
      // A server hands a lease as PENDING (to be accepted) or, like BuildGrid, already ACTIVE.
      for (rw::Lease& lease : *session.mutable_leases()) {
        if (lease.state() != rw::LeaseState::PENDING && lease.state() != rw::LeaseState::ACTIVE) continue;
        complete(lease);
        ++ran;
      }
      // Completed leases are reported once, then the server drops them.
      if (!update(session)) return 1;
      auto* leases = session.mutable_leases();
      for (int i = leases->size() - 1; i >= 0; --i) {
        if (leases->Get(i).state() == rw::LeaseState::COMPLETED || leases->Get(i).state() == rw::LeaseState::CANCELLED) {
          leases->DeleteSubrange(i, 1);
        }
      }
    }
    return 0;
  }

 private:
  rw::BotSession describe() const {
    rw::BotSession session;
    session.set_bot_id(settings_.bot_id);
    session.set_status(rw::BotStatus::OK);
    rw::Device* device = session.mutable_worker()->add_devices();
    device->set_handle(settings_.bot_id);
    for (const auto& [key, value] : settings_.properties) {
      auto* p = device->add_properties();
      p->set_key(key);
      p->set_value(value);
    }
    return session;
  }

  // A worker is a service: it waits for its server to come up (or back) however long that takes.
  bool create(rw::BotSession& session) {
    for (;;) {
      rw::CreateBotSessionRequest req;
      req.set_parent(settings_.server.instance);
      *req.mutable_bot_session() = session;
      auto ctx = call_context(settings_.server, kPollSeconds);
      ctx->set_wait_for_ready(true);
      grpc::Status s = bots_->CreateBotSession(ctx.get(), req, &session);
      if (s.ok()) {
        std::printf("kache-worker: session %s\n", session.name().c_str());
        std::fflush(stdout);
        return true;
      }
      if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;
      std::fprintf(stderr, "kache-worker: CreateBotSession: %s\n", s.error_message().c_str());
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

  bool update(rw::BotSession& session) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      rw::UpdateBotSessionRequest req;
      req.set_name(session.name());
      *req.mutable_bot_session() = session;
      rw::BotSession answer;
      auto ctx = call_context(settings_.server, kPollSeconds);
      ctx->set_wait_for_ready(true);
      grpc::Status s = bots_->UpdateBotSession(ctx.get(), req, &answer);
      if (s.ok()) {
        session = std::move(answer);
        return true;
      }

      if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;  // no work came: ask again
      std::fprintf(stderr, "kache-worker: UpdateBotSession: %s\n", s.error_message().c_str());
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return false;
  }

  void complete(rw::Lease& lease) {
    re::ActionResult result;
    google::rpc::Status status;
    run_lease(lease, result, status);
    lease.set_state(rw::LeaseState::COMPLETED);
    *lease.mutable_status() = status;
    lease.mutable_result()->PackFrom(result);
  }

  // The lease's action, run; status says why it did not run (a missing blob, another toolchain).
  void run_lease(const rw::Lease& lease, re::ActionResult& result, google::rpc::Status& status) {
    re::Action action;
    if (!lease.payload().UnpackTo(&action)) {
      re::Digest digest;
      std::string bytes;
      if (!lease.payload().UnpackTo(&digest) || !fetch(digest, bytes) || !action.ParseFromString(bytes)) {
        status.set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
        status.set_message("kache worker: the lease holds no action it can read");
        return;
      }
    }
    std::string bytes;
    re::Command command;
    if (!fetch(action.command_digest(), bytes) || !command.ParseFromString(bytes)) {
      status.set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
      status.set_message("kache worker: the command cannot be read");
      return;
    }
    if (std::string why = platform_mismatch(command.platform()); !why.empty()) {
      status.set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      status.set_message("kache worker " + settings_.bot_id + ": " + why);
      return;
    }
    execute(action, command, result, status);
  }

  // "" when every property the action pins is this worker's, else which is not. A worker may serve
  // several values of one property (an nvcc toolchain and a gcc one).
  std::string platform_mismatch(const re::Platform& platform) const {
    const auto& mine = settings_.properties;
    for (const auto& p : platform.properties()) {
      if (std::find(mine.begin(), mine.end(), std::pair(p.name(), p.value())) == mine.end()) {
        std::string has;
        for (const auto& [name, value] : mine) has += name == p.name() ? (has.empty() ? "" : ", ") + value : "";
        return fmt::format("the action needs {}={}, this worker has {}", p.name(), p.value(), has.empty() ? "none" : has);
      }
    }
    return "";
  }

  bool fetch(const re::Digest& d, std::string& bytes) {
    return read_blob(*channel_, settings_.server, d.hash(), d.size_bytes(), bytes, kBlobSeconds).ok();
  }

  bool materialize(const re::Digest& dir_digest, const std::string& dir, int depth) {
    std::string bytes;
    re::Directory d;
    if (depth > 64 || !fetch(dir_digest, bytes) || !d.ParseFromString(bytes)) return false;
    util::create_directories(dir);
    for (const auto& f : d.files()) {
      if (!plain_name(f.name()) || !fetch(f.digest(), bytes)) return false;
      const std::string path = util::join_path(dir, f.name());
      util::write_file(path, bytes);
      if (f.is_executable()) ::chmod(path.c_str(), 0755);
    }
    for (const auto& sub : d.directories()) {
      if (!plain_name(sub.name()) || !materialize(sub.digest(), util::join_path(dir, sub.name()), depth + 1)) {
        return false;
      }
    }
    return true;
  }

  void execute(const re::Action& action, const re::Command& command, re::ActionResult& result,
               google::rpc::Status& status) {
    const std::string root = util::join_path(settings_.work_dir, fmt::format("action-{}", ++serial_));
    util::remove_all(root);
    const std::string cwd = util::join_path(root, command.working_directory());
    if (!inside(command.working_directory()) || command.arguments().empty() ||
        !materialize(action.input_root_digest(), root, 0)) {
      status.set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
      status.set_message("kache worker: the input root cannot be built");
      util::remove_all(root);
      return;
    }
    util::create_directories(cwd);
    run_command(action, command, root, cwd, result, status);
    util::remove_all(root);
  }

  void run_command(const re::Action& action, const re::Command& command, const std::string& root,
                   const std::string& cwd, re::ActionResult& result, google::rpc::Status& status) {
    std::vector<std::string> argv(command.arguments().begin(), command.arguments().end());
    util::Environment env;
    for (const auto& v : command.environment_variables()) env.push_back(v.name() + "=" + v.value());
    // The output files' directories exist before the command runs (REAPI's rule).
    for (const auto& out : command.output_files()) {
      if (!inside(out)) continue;
      const std::string path = util::join_path(cwd, out);
      util::create_directories(path.substr(0, path.rfind('/')));
    }
    const std::string exe = argv[0].starts_with('/') ? argv[0] : util::join_path(cwd, argv[0]);
    const int limit_ms = action.has_timeout() && action.timeout().seconds() > 0
                             ? static_cast<int>(action.timeout().seconds() * 1000)
                             : static_cast<int>(settings_.server.timeout_s * 1000);
    util::BoundedProcessResult r;
    try {
      r = util::run_capture_bounded_in(exe, argv, env, cwd, limit_ms);
    } catch (const std::exception& e) {
      status.set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      status.set_message(fmt::format("kache worker: {} cannot be started: {}", argv[0], e.what()));
      return;
    }
    if (r.timed_out) {
      status.set_code(static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED));
      status.set_message("kache worker: the action ran past its timeout");
      return;
    }
    result.set_exit_code(r.term_signal != 0 ? 128 + r.term_signal : r.exit_code);
    result.set_stdout_raw(r.out);
    result.set_stderr_raw(r.err);
    result.mutable_execution_metadata()->set_worker(settings_.bot_id);
    if (!collect_outputs(command, root, cwd, result, status)) return;
    std::printf("kache-worker: ran %s exit %d\n", util::basename(argv[0]).c_str(), result.exit_code());
    std::fflush(stdout);
  }

  // Uploads the output files; an output naming the private directory is refused (it would differ from
  // what the client's own run writes).
  bool collect_outputs(const re::Command& command, const std::string& root, const std::string& cwd,
                       re::ActionResult& result, google::rpc::Status& status) {
    std::vector<std::string> outputs(command.output_files().begin(), command.output_files().end());
    for (const auto& out : command.output_paths()) {
      if (std::find(outputs.begin(), outputs.end(), out) == outputs.end()) outputs.push_back(out);
    }
    for (const std::string& out : outputs) {
      if (!inside(out)) continue;
      std::string bytes;
      try {
        bytes = util::read_file(util::join_path(cwd, out));
      } catch (const std::exception&) {
        continue;  // an output the command did not write
      }
      if (bytes.find(root) != std::string::npos) {
        status.set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
        status.set_message(fmt::format("kache worker: {} names the worker's private directory", out));
        return false;
      }
      const std::string hash = content_digest(bytes);
      if (!write_blob(*channel_, settings_.server, hash, bytes, kBlobSeconds).ok()) {
        status.set_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
        status.set_message("kache worker: an output cannot be uploaded");
        return false;
      }
      auto* f = result.add_output_files();
      f->set_path(out);
      f->mutable_digest()->set_hash(hash);
      f->mutable_digest()->set_size_bytes(static_cast<std::int64_t>(bytes.size()));
    }
    return true;
  }

  const WorkerSettings& settings_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rw::Bots::Stub> bots_;
  std::uint64_t serial_ = 0;
};

}  // namespace

int run_worker(const WorkerSettings& settings) {
  auto channel = channel_target(settings.server);
  if (auto* why = std::get_if<std::string>(&channel)) {
    std::fprintf(stderr, "kache worker: %s\n", why->c_str());
    return 2;
  }
  util::create_directories(settings.work_dir);
  Worker worker(settings, std::get<std::shared_ptr<grpc::Channel>>(channel));
  return worker.serve();
}

}  // namespace kache::remote_exec
