#include "remote_exec/grpc/grpc_client.hpp"

#include <build/bazel/remote/execution/v2/remote_execution.grpc.pb.h>
#include <google/longrunning/operations.pb.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "remote_exec/grpc/channel.hpp"

namespace kache::remote_exec {

namespace re = build::bazel::remote::execution::v2;

namespace {

// Blobs at most this large go in one batch call; larger ones by ByteStream (the gRPC message limit is
// 4 MiB, and the server may say less).
constexpr std::int64_t kDefaultBatchBytes = 3 << 20;
// The calls that move metadata or blobs: each has this long at most (an action's own wait is the
// configured timeout).
constexpr double kCallSeconds = 60;

re::Digest digest_of(std::string_view bytes) {
  re::Digest d;
  d.set_hash(content_digest(bytes));
  d.set_size_bytes(static_cast<std::int64_t>(bytes.size()));
  return d;
}

Failure failure_of(const grpc::Status& s, std::string_view call) {
  std::string reason = "error";
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) reason = "unreachable";
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) reason = "timeout";
  return {reason, fmt::format("{}: {} ({})", call, s.error_message(), static_cast<int>(s.error_code()))};
}

// The blobs of one action: every file, directory, the command and the action, by digest.
struct Upload {
  std::map<std::string, std::string> blobs;  // hash -> bytes
  re::Digest add(std::string bytes) {
    re::Digest d = digest_of(bytes);
    blobs.emplace(d.hash(), std::move(bytes));
    return d;
  }
};

// A directory of the input root while it is built: files and subdirectories by name (REAPI wants them
// sorted, which std::map gives).
struct Tree {
  std::map<std::string, std::pair<re::Digest, bool>> files;  // name -> digest, executable
  std::map<std::string, Tree> dirs;
};

re::Digest store_tree(const Tree& t, Upload& up) {
  re::Directory dir;
  for (const auto& [name, file] : t.files) {
    auto* f = dir.add_files();
    f->set_name(name);
    *f->mutable_digest() = file.first;
    f->set_is_executable(file.second);
  }
  for (const auto& [name, sub] : t.dirs) {
    auto* d = dir.add_directories();
    d->set_name(name);
    *d->mutable_digest() = store_tree(sub, up);
  }
  std::string bytes;
  dir.SerializeToString(&bytes);
  return up.add(std::move(bytes));
}

std::vector<std::string> path_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

re::Digest input_root(const std::vector<InputFile>& inputs, Upload& up) {
  Tree root;
  for (const InputFile& in : inputs) {
    Tree* t = &root;
    const auto parts = path_parts(in.path);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) t = &t->dirs[parts[i]];
    t->files[parts.back()] = {up.add(in.bytes), in.executable};
  }
  return store_tree(root, up);
}

re::Digest store_action(const ActionSpec& spec, Upload& up, double timeout_s) {
  re::Command cmd;
  for (const auto& a : spec.arguments) cmd.add_arguments(a);
  auto env = spec.environment;
  std::sort(env.begin(), env.end());
  for (const auto& [name, value] : env) {
    auto* v = cmd.add_environment_variables();
    v->set_name(name);
    v->set_value(value);
  }
  auto outs = spec.output_files;
  std::sort(outs.begin(), outs.end());
  for (const auto& o : outs) {
    cmd.add_output_files(o);
    cmd.add_output_paths(o);
  }
  cmd.set_working_directory(spec.working_directory);
  auto platform = spec.platform;
  std::sort(platform.begin(), platform.end());
  re::Platform* p = cmd.mutable_platform();
  for (const auto& [name, value] : platform) {
    auto* prop = p->add_properties();
    prop->set_name(name);
    prop->set_value(value);
  }
  std::string cmd_bytes;
  cmd.SerializeToString(&cmd_bytes);
  re::Action action;
  *action.mutable_command_digest() = up.add(std::move(cmd_bytes));
  *action.mutable_input_root_digest() = input_root(spec.inputs, up);
  *action.mutable_platform() = *p;
  action.mutable_timeout()->set_seconds(static_cast<std::int64_t>(timeout_s));
  std::string action_bytes;
  action.SerializeToString(&action_bytes);
  return up.add(std::move(action_bytes));
}

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(const ServerSettings& s) : settings_(s) {}

  std::variant<Failure, Capabilities> capabilities() override {
    if (auto f = connect()) return *f;
    re::GetCapabilitiesRequest req;
    req.set_instance_name(settings_.instance);
    re::ServerCapabilities caps;
    auto ctx = context(kCallSeconds);
    grpc::Status s = re::Capabilities::NewStub(channel_)->GetCapabilities(ctx.get(), req, &caps);
    if (!s.ok()) return failure_of(s, "GetCapabilities");
    Capabilities c;
    c.execution_enabled = caps.has_execution_capabilities() && caps.execution_capabilities().exec_enabled();
    for (int f : caps.cache_capabilities().digest_function()) c.sha256 |= f == re::DigestFunction::SHA256;
    if (caps.execution_capabilities().digest_function() == re::DigestFunction::SHA256) c.sha256 = true;
    c.max_batch_bytes = caps.cache_capabilities().max_batch_total_size_bytes();
    c.api_low = fmt::format("{}.{}", caps.low_api_version().major(), caps.low_api_version().minor());
    c.api_high = fmt::format("{}.{}", caps.high_api_version().major(), caps.high_api_version().minor());
    return c;
  }

  std::variant<Failure, ActionOutcome> execute(const ActionSpec& spec) override {
    if (auto f = connect()) return *f;
    Upload up;
    const re::Digest action = store_action(spec, up, settings_.timeout_s);
    if (auto f = upload_missing(up)) return *f;
    re::ActionResult result;
    bool cached = false;
    // Untrusted, the ActionCache is never asked: another client may have written any result there.
    if (settings_.trusted) {
      if (auto f = lookup(action, result, cached)) return *f;
    }
    if (!cached) {
      if (auto f = run(action, result)) return *f;
    }
    auto outcome = read_outcome(result);
    if (auto* o = std::get_if<ActionOutcome>(&outcome)) o->cached = cached;
    return outcome;
  }

 private:
  std::optional<Failure> connect() {
    if (channel_) return std::nullopt;
    auto target = channel_target(settings_);
    if (auto* why = std::get_if<std::string>(&target)) return Failure{"error", *why};
    channel_ = std::get<std::shared_ptr<grpc::Channel>>(target);
    return std::nullopt;
  }

  std::unique_ptr<grpc::ClientContext> context(double seconds) const { return call_context(settings_, seconds); }

  std::optional<Failure> upload_missing(const Upload& up) {
    re::FindMissingBlobsRequest req;
    req.set_instance_name(settings_.instance);
    for (const auto& [hash, bytes] : up.blobs) *req.add_blob_digests() = digest_of(bytes);
    re::FindMissingBlobsResponse missing;
    auto ctx = context(kCallSeconds);
    auto cas = re::ContentAddressableStorage::NewStub(channel_);
    grpc::Status s = cas->FindMissingBlobs(ctx.get(), req, &missing);
    if (!s.ok()) return failure_of(s, "FindMissingBlobs");
    re::BatchUpdateBlobsRequest batch;
    std::int64_t batch_bytes = 0;
    for (const re::Digest& d : missing.missing_blob_digests()) {
      auto it = up.blobs.find(d.hash());
      if (it == up.blobs.end()) continue;
      if (d.size_bytes() > kDefaultBatchBytes) {
        if (auto f = write_stream(d, it->second)) return f;
        continue;
      }
      if (batch_bytes + d.size_bytes() > kDefaultBatchBytes) {
        if (auto f = send_batch(*cas, batch)) return f;
        batch.Clear();
        batch_bytes = 0;
      }
      auto* r = batch.add_requests();
      *r->mutable_digest() = d;
      r->set_data(it->second);
      batch_bytes += d.size_bytes();
    }
    if (batch.requests_size() > 0) return send_batch(*cas, batch);
    return std::nullopt;
  }

  std::optional<Failure> send_batch(re::ContentAddressableStorage::Stub& cas, re::BatchUpdateBlobsRequest& batch) {
    batch.set_instance_name(settings_.instance);
    re::BatchUpdateBlobsResponse resp;
    auto ctx = context(kCallSeconds);
    grpc::Status s = cas.BatchUpdateBlobs(ctx.get(), batch, &resp);
    if (!s.ok()) return failure_of(s, "BatchUpdateBlobs");
    for (const auto& r : resp.responses()) {
      if (r.status().code() != 0) return Failure{"error", "BatchUpdateBlobs: " + r.status().message()};
    }
    return std::nullopt;
  }

  std::optional<Failure> write_stream(const re::Digest& d, const std::string& bytes) {
    grpc::Status s = write_blob(*channel_, settings_, d.hash(), bytes, kCallSeconds);
    if (!s.ok()) return failure_of(s, "ByteStream.Write");
    return std::nullopt;
  }

  std::optional<Failure> lookup(const re::Digest& action, re::ActionResult& result, bool& found) {
    re::GetActionResultRequest req;
    req.set_instance_name(settings_.instance);
    *req.mutable_action_digest() = action;
    auto ctx = context(kCallSeconds);
    grpc::Status s = re::ActionCache::NewStub(channel_)->GetActionResult(ctx.get(), req, &result);
    found = s.ok();
    if (s.ok() || s.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
    return failure_of(s, "GetActionResult");
  }

  std::optional<Failure> run(const re::Digest& action, re::ActionResult& result) {
    re::ExecuteRequest req;
    req.set_instance_name(settings_.instance);
    *req.mutable_action_digest() = action;
    req.set_skip_cache_lookup(true);  // looked up just before, or not trusted
    auto ctx = context(settings_.timeout_s);
    auto stream = re::Execution::NewStub(channel_)->Execute(ctx.get(), req);
    google::longrunning::Operation op;
    bool done = false;
    while (!done && stream->Read(&op)) done = op.done();
    grpc::Status s = stream->Finish();
    if (!done) return failure_of(s.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN, "the stream ended early") : s,
                                 "Execute");
    if (op.has_error()) return Failure{"error", "Execute: " + op.error().message()};
    re::ExecuteResponse response;
    if (!op.response().UnpackTo(&response)) return Failure{"error", "Execute: no ExecuteResponse"};
    const auto code = response.status().code();
    if (code == grpc::StatusCode::FAILED_PRECONDITION) return Failure{"refused", response.status().message()};
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED) return Failure{"timeout", response.status().message()};
    if (code != 0) return Failure{"error", fmt::format("Execute: {} ({})", response.status().message(), code)};
    result = response.result();
    return std::nullopt;
  }

  std::variant<Failure, std::string> read(const re::Digest& d) {
    std::string bytes;
    grpc::Status s = read_blob(*channel_, settings_, d.hash(), d.size_bytes(), bytes, kCallSeconds);
    if (!s.ok()) return failure_of(s, "ByteStream.Read");
    return bytes;
  }

  std::variant<Failure, ActionOutcome> read_outcome(const re::ActionResult& result) {
    ActionOutcome o;
    o.exit_code = result.exit_code();
    o.worker = result.execution_metadata().worker();
    for (auto [raw, digest, text] : {std::tuple(&result.stdout_raw(), &result.stdout_digest(), &o.out),
                                     std::tuple(&result.stderr_raw(), &result.stderr_digest(), &o.err)}) {
      *text = *raw;
      if (raw->empty() && digest->size_bytes() > 0) {
        auto bytes = read(*digest);
        if (auto* f = std::get_if<Failure>(&bytes)) return *f;
        *text = std::get<std::string>(bytes);
      }
    }
    for (const auto& f : result.output_files()) {
      auto bytes = read(f.digest());
      if (auto* fail = std::get_if<Failure>(&bytes)) return *fail;
      o.outputs.push_back({f.path(), std::get<std::string>(bytes)});
    }
    return o;
  }

  ServerSettings settings_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace

std::unique_ptr<Client> open_grpc_client(const ServerSettings& settings) {
  return std::make_unique<GrpcClient>(settings);
}

}  // namespace kache::remote_exec
