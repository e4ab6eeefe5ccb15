#include "remote_exec/grpc/worker.hpp"

#include <build/bazel/remote/execution/v2/remote_execution.pb.h>
#include <google/devtools/remoteworkers/v1test2/bots.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <sys/prctl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fmt/format.h>
#include <map>
#include <sys/stat.h>
#include <thread>

#include "remote_exec/grpc/channel.hpp"
#include "remote_exec/input_root.hpp"
#include "util/beneath.hpp"
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

// A fresh directory for one action, with a name no one can guess, created exclusively (0700) in the work
// dir; its path. Throws std::system_error.
std::string create_action_dir(const util::Beneath& work) {
  for (int attempt = 0;; ++attempt) {
    std::uint64_t nonce = 0;
    if (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce)) {
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    const std::string name = fmt::format("action-{:016x}", nonce);
    if (::mkdirat(work.fd(), name.c_str(), 0700) == 0) return util::join_path(work.path(), name);
    if (errno != EEXIST || attempt > 16) throw std::system_error(errno, std::generic_category(), "mkdir " + name);
  }
}

// The CAS as the materialization's source (remote_exec/input_root.hpp).
class CasSource final : public InputSource {
 public:
  explicit CasSource(std::function<bool(const re::Digest&, std::string&)> fetch) : fetch_(std::move(fetch)) {}
  std::optional<InputDirectory> directory(const BlobDigest& digest) override {
    std::string bytes;
    re::Directory d;
    if (!fetch_(digest_of(digest), bytes) || !d.ParseFromString(bytes)) return std::nullopt;
    InputDirectory out;
    for (const auto& f : d.files()) {
      out.files.push_back({f.name(), {f.digest().hash(), f.digest().size_bytes()}, f.is_executable()});
    }
    for (const auto& sub : d.directories()) out.directories.push_back({sub.name(), {sub.digest().hash(), sub.digest().size_bytes()}});
    return out;
  }
  std::optional<std::string> blob(const BlobDigest& digest) override {
    std::string bytes;
    if (!fetch_(digest_of(digest), bytes)) return std::nullopt;
    return bytes;
  }

 private:
  static re::Digest digest_of(const BlobDigest& d) {
    re::Digest out;
    out.set_hash(d.hash);
    out.set_size_bytes(d.size_bytes);
    return out;
  }
  std::function<bool(const re::Digest&, std::string&)> fetch_;
};

// The worker's own environment (it holds the bearer token) is copied to the heap, and the bytes the kernel
// shows as /proc/<pid>/environ are zeroed: an action, a child of the worker, could read them there. The
// worker also becomes non-dumpable, so that a process of its user cannot read its memory or that file.
void forget_startup_environment() {
  static std::vector<std::string> copies;
  static std::vector<char*> pointers;
  std::vector<std::pair<char*, std::size_t>> originals;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    copies.emplace_back(*e);
    originals.emplace_back(*e, std::strlen(*e));
  }
  for (auto& c : copies) pointers.push_back(c.data());
  pointers.push_back(nullptr);
  environ = pointers.data();
  for (auto [bytes, size] : originals) std::memset(bytes, 0, size);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

void fail(google::rpc::Status& status, grpc::StatusCode code, const std::string& message) {
  status.set_code(static_cast<int>(code));
  status.set_message(message);
}

class Worker {
 public:
  Worker(const WorkerSettings& s, util::Beneath work, std::shared_ptr<grpc::Channel> channel)
      : settings_(s), work_(std::move(work)), channel_(std::move(channel)), bots_(rw::Bots::NewStub(channel_)) {}

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
    re::Digest digest;
    if (lease.payload().UnpackTo(&action)) {
      const std::string serialized = action.SerializeAsString();
      digest.set_hash(content_digest(serialized));
      digest.set_size_bytes(static_cast<std::int64_t>(serialized.size()));
    } else {
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
    action_digest_ = fmt::format("{}/{}", digest.hash(), digest.size_bytes());
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

  // A blob of the CAS, bounded (kMaxBlobBytes, and the size its digest says).
  bool fetch(const re::Digest& d, std::string& bytes) {
    if (!acceptable_digest({d.hash(), d.size_bytes()})) return false;
    return read_blob(*channel_, settings_.server, d.hash(), d.size_bytes(), bytes, kBlobSeconds).ok();
  }

  void execute(const re::Action& action, const re::Command& command, re::ActionResult& result,
               google::rpc::Status& status) {
    if (!relative_inside(command.working_directory()) || command.arguments().empty()) {
      return fail(status, grpc::StatusCode::INVALID_ARGUMENT, "kache worker: the command is malformed");
    }
    std::string root;
    try {
      root = create_action_dir(work_);
      util::Beneath action_dir(root);
      CasSource source([this](const re::Digest& d, std::string& bytes) { return fetch(d, bytes); });
      const auto& digest = action.input_root_digest();
      std::string why = materialize_input_root(action_dir, {digest.hash(), digest.size_bytes()}, source);
      std::string refused;
      if (why.empty() && !action_dir.create_directories(command.working_directory(), 0700, &refused)) {
        why = "the working directory: " + refused;
      }
      if (!why.empty()) {
        fail(status, grpc::StatusCode::INVALID_ARGUMENT, "kache worker: " + why);
      } else {
        run_command(action, command, action_dir, result, status);
      }
    } catch (const std::exception& e) {
      fail(status, grpc::StatusCode::INTERNAL, std::string("kache worker: ") + e.what());
    }
    if (!root.empty()) util::remove_all(root);
  }

  void run_command(const re::Action& action, const re::Command& command, const util::Beneath& action_dir,
                   re::ActionResult& result, google::rpc::Status& status) {
    const std::string cwd = util::join_path(action_dir.path(), command.working_directory());
    std::vector<std::string> argv(command.arguments().begin(), command.arguments().end());
    // Only the action's own variables: nothing of the worker's environment (its bearer token) reaches it.
    util::Environment env;
    for (const auto& v : command.environment_variables()) env.push_back(v.name() + "=" + v.value());
    // The output files' directories exist before the command runs (REAPI's rule).
    for (const auto& out : command.output_files()) {
      const std::string path = util::join_path(command.working_directory(), out);
      if (relative_inside(out) && path.find('/') != std::string::npos) {
        (void)action_dir.create_directories(path.substr(0, path.rfind('/')), 0700);
      }
    }
    const std::string exe = argv[0].starts_with('/') ? argv[0] : util::join_path(cwd, argv[0]);
    const int limit_ms = action.has_timeout() && action.timeout().seconds() > 0
                             ? static_cast<int>(action.timeout().seconds() * 1000)
                             : static_cast<int>(settings_.server.timeout_s * 1000);
    util::BoundedProcessResult r;
    try {
      r = util::run_capture_bounded_in(exe, argv, env, cwd, limit_ms);
    } catch (const std::exception& e) {
      return fail(status, grpc::StatusCode::FAILED_PRECONDITION,
                  fmt::format("kache worker: {} cannot be started: {}", argv[0], e.what()));
    }
    if (r.timed_out) return fail(status, grpc::StatusCode::DEADLINE_EXCEEDED, "kache worker: the action ran past its timeout");
    result.set_exit_code(r.term_signal != 0 ? 128 + r.term_signal : r.exit_code);
    result.set_stdout_raw(r.out);
    result.set_stderr_raw(r.err);
    result.mutable_execution_metadata()->set_worker(settings_.bot_id);
    if (!collect_outputs(command, action_dir, result, status)) return;
    std::printf("kache-worker: ran %s exit %d action %s\n", util::basename(argv[0]).c_str(), result.exit_code(),
                action_digest_.c_str());
    std::fflush(stdout);
  }

  // Uploads the output files, read below the action's directory (never through a link); an output that
  // is no regular file, or that names the private directory (it would differ from what the client's own
  // run writes), fails the action.
  bool collect_outputs(const re::Command& command, const util::Beneath& action_dir, re::ActionResult& result,
                       google::rpc::Status& status) {
    std::vector<std::string> outputs(command.output_files().begin(), command.output_files().end());
    for (const auto& out : command.output_paths()) {
      if (std::find(outputs.begin(), outputs.end(), out) == outputs.end()) outputs.push_back(out);
    }
    for (const std::string& out : outputs) {
      if (!relative_inside(out)) continue;
      std::string error;
      std::optional<std::string> bytes = read_output(action_dir, util::join_path(command.working_directory(), out), &error);
      if (!error.empty()) {
        fail(status, grpc::StatusCode::FAILED_PRECONDITION, "kache worker: " + error);
        return false;
      }
      if (!bytes) continue;  // an output the command did not write
      if (bytes->find(action_dir.path()) != std::string::npos) {
        fail(status, grpc::StatusCode::FAILED_PRECONDITION,
             fmt::format("kache worker: {} names the worker's private directory", out));
        return false;
      }
      const std::string hash = content_digest(*bytes);
      if (!write_blob(*channel_, settings_.server, hash, *bytes, kBlobSeconds).ok()) {
        fail(status, grpc::StatusCode::UNAVAILABLE, "kache worker: an output cannot be uploaded");
        return false;
      }
      auto* f = result.add_output_files();
      f->set_path(out);
      f->mutable_digest()->set_hash(hash);
      f->mutable_digest()->set_size_bytes(static_cast<std::int64_t>(bytes->size()));
    }
    return true;
  }

  const WorkerSettings& settings_;
  util::Beneath work_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rw::Bots::Stub> bots_;
  std::string action_digest_;  // of the action running: its log line names it
};

}  // namespace

int run_worker(const WorkerSettings& settings) {
  forget_startup_environment();
  std::string why;
  std::optional<util::Beneath> work = open_work_dir(settings.work_dir, &why);
  if (!work) {
    std::fprintf(stderr, "kache worker: %s\n", why.c_str());
    return 2;
  }
  auto channel = channel_target(settings.server);
  if (auto* why = std::get_if<std::string>(&channel)) {
    std::fprintf(stderr, "kache worker: %s\n", why->c_str());
    return 2;
  }
  Worker worker(settings, std::move(*work), std::get<std::shared_ptr<grpc::Channel>>(channel));
  return worker.serve();
}

}  // namespace kache::remote_exec
