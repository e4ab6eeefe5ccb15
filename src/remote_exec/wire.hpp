#pragma once
// What kache and kache-reapi say to each other (docs/remote-execution.md). kache-reapi is the one program
// that links gRPC and protobuf: kache spawns it for a miss that runs remotely, for doctor's probe and for
// `kache worker`, so a hit never pays their start (protobuf's descriptor registration). A request and a
// reply are CBOR (nlohmann-json, file bytes as CBOR byte strings); the worker's settings are JSON text on
// its command line. Neither ever carries the bearer token: kache-reapi reads it from its environment
// (KACHE_REMOTE_EXECUTION_BEARER_TOKEN), as kache does.
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "remote_exec/client.hpp"

namespace kache::remote_exec {

// The program's file name, beside kache's own.
inline constexpr std::string_view kHelperName = "kache-reapi";
// Its path beside the running program. A build without gRPC (scripts/setup.sh) has no file there.
std::string helper_path();

struct Request {
  ServerSettings settings;  // bearer_token empty
  ActionSpec action;        // execute only
};

std::string encode_request(const ServerSettings& settings, const ActionSpec& action);
// nullopt for bytes that are not such a request.
std::optional<Request> decode_request(std::string_view bytes);

std::string encode_reply(const std::variant<Failure, ActionOutcome>& reply);
std::string encode_reply(const std::variant<Failure, Capabilities>& reply);
std::optional<std::variant<Failure, ActionOutcome>> decode_outcome_reply(std::string_view bytes);
std::optional<std::variant<Failure, Capabilities>> decode_capabilities_reply(std::string_view bytes);

std::string encode_worker_settings(const WorkerSettings& settings);
std::optional<WorkerSettings> decode_worker_settings(std::string_view json_text);

}  // namespace kache::remote_exec
