#pragma once
// A Remote Execution API (REAPI v2) client (docs/remote-execution.md): an action (command, input root,
// platform properties) uploaded to a server's CAS and executed there by one of its workers, the result's
// outputs read back. Plain C++ types here; gRPC and the generated messages stay in grpc_client.cpp, which
// only kache-reapi links (a hit of kache never pays protobuf's start). Every call carries a deadline: no failure of the server waits forever.
// The ActionCache is read (GetActionResult) only when the user trusts the service (ServerSettings::trusted):
// any client allowed to update it chooses what a lookup returns.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kache::remote_exec {

struct ServerSettings {
  std::string url;           // grpc://host:port or grpcs://host:port
  std::string instance;      // the REAPI instance name ("" the default)
  std::string ca_file;       // grpcs://: a CA certificate; "" the system's
  std::string bearer_token;  // sent as "authorization: Bearer ..."; never printed
  double timeout_s = 600;    // the longest an action may take, queue included
  // remote_execution.trusted: the server's ActionCache is read (else every action executes, its cache
  // lookup skipped, and what another client planted there is never restored).
  bool trusted = false;
};

struct Capabilities {
  bool execution_enabled = false;
  bool sha256 = false;                // the digest function kache speaks
  std::int64_t max_batch_bytes = 0;   // 0: the server sets no limit
  std::string api_low, api_high;      // "2.0"
};

struct InputFile {
  std::string path;  // relative to the input root, '/'-separated, no "." or ".." parts
  std::string bytes;
  bool executable = false;
};

struct ActionSpec {
  std::vector<std::string> arguments;                              // argv, argv[0] the program
  std::vector<std::pair<std::string, std::string>> environment;    // name, value
  std::string working_directory;                                   // relative to the input root
  std::vector<std::string> output_files;                           // relative to working_directory
  std::vector<InputFile> inputs;
  std::vector<std::pair<std::string, std::string>> platform;       // name, value (the toolchain pins)
};

struct OutputFile {
  std::string path;  // as the action named it
  std::string bytes;
};

struct ActionOutcome {
  int exit_code = 0;
  std::string out, err;
  std::vector<OutputFile> outputs;  // the output files the worker produced
  std::string worker;               // the worker that ran it, as the server reports
  bool cached = false;              // the server's ActionCache answered
};

// Why a remote action did not give an outcome: a stable name (counted as remote_fallback.<name>) and a
// sentence for the log.
struct Failure {
  std::string reason;  // "unreachable", "timeout", "error", "refused" (a worker's precondition)
  std::string detail;
};

class Client {
 public:
  virtual ~Client() = default;
  // The server's capabilities (reachability included), or why not.
  virtual std::variant<Failure, Capabilities> capabilities() = 0;
  // Uploads what the server lacks, looks the action up in the ActionCache, else executes it and waits
  // for its result, then reads its outputs.
  virtual std::variant<Failure, ActionOutcome> execute(const ActionSpec& action) = 0;
};

// A client for the server. In kache each call runs kache-reapi (helper_client.cpp, wire.hpp), the program
// that links gRPC; in kache-reapi, open_grpc_client (grpc_client.hpp) speaks gRPC itself.
std::unique_ptr<Client> open_client(const ServerSettings& settings);

// The REAPI digest of bytes: SHA-256 hex.
std::string content_digest(std::string_view bytes);

// `kache worker`'s settings, as kache hands them to kache-reapi (remote_exec/grpc/worker.hpp).
struct WorkerSettings {
  ServerSettings server;
  std::string bot_id;                                             // unique per worker process
  std::vector<std::pair<std::string, std::string>> properties;    // the platform this worker serves
  std::string work_dir;                                           // private directories go under it
  std::uint64_t max_actions = 0;                                  // 0: until killed
};

}  // namespace kache::remote_exec
