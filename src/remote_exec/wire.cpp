#include "remote_exec/wire.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"

namespace kache::remote_exec {

using nlohmann::json;

std::string content_digest(std::string_view bytes) { return util::sha256(bytes).hex(); }

std::string helper_path() { return util::join_path(util::dirname(util::self_executable()), std::string(kHelperName)); }

namespace {

json bytes_of(std::string_view s) { return json::binary(std::vector<std::uint8_t>(s.begin(), s.end())); }

std::string text_of(const json& j) {
  const auto& b = j.get_binary();
  return std::string(b.begin(), b.end());
}

json pairs_of(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::array();
  for (const auto& [name, value] : pairs) out.push_back(json::array({name, value}));
  return out;
}

std::vector<std::pair<std::string, std::string>> pairs_from(const json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : j) out.emplace_back(p.at(0).get<std::string>(), p.at(1).get<std::string>());
  return out;
}

json settings_of(const ServerSettings& s) {
  return {{"url", s.url}, {"instance", s.instance}, {"ca_file", s.ca_file}, {"timeout_s", s.timeout_s}, {"trusted", s.trusted}};
}

ServerSettings settings_from(const json& j) {
  ServerSettings s;
  s.url = j.at("url").get<std::string>();
  s.instance = j.at("instance").get<std::string>();
  s.ca_file = j.at("ca_file").get<std::string>();
  s.timeout_s = j.at("timeout_s").get<double>();
  s.trusted = j.value("trusted", false);
  return s;
}

std::string to_cbor(const json& j) {
  const std::vector<std::uint8_t> v = json::to_cbor(j);
  return std::string(v.begin(), v.end());
}

// The CBOR document, or a discarded value for bytes that are not one.
json from_cbor(std::string_view bytes) {
  return json::from_cbor(bytes.begin(), bytes.end(), true, false, json::cbor_tag_handler_t::error);
}

json failure_of(const Failure& f) { return {{"failure", {{"reason", f.reason}, {"detail", f.detail}}}}; }

Failure failure_from(const json& j) { return {j.at("reason").get<std::string>(), j.at("detail").get<std::string>()}; }

}  // namespace

std::string encode_request(const ServerSettings& settings, const ActionSpec& a) {
  json inputs = json::array();
  for (const auto& in : a.inputs) inputs.push_back({{"path", in.path}, {"bytes", bytes_of(in.bytes)}, {"x", in.executable}});
  return to_cbor({{"settings", settings_of(settings)},
                  {"arguments", a.arguments},
                  {"environment", pairs_of(a.environment)},
                  {"working_directory", a.working_directory},
                  {"output_files", a.output_files},
                  {"inputs", inputs},
                  {"platform", pairs_of(a.platform)}});
}

std::optional<Request> decode_request(std::string_view bytes) {
  try {
    const json j = from_cbor(bytes);
    if (!j.is_object()) return std::nullopt;
    Request r;
    r.settings = settings_from(j.at("settings"));
    r.action.arguments = j.at("arguments").get<std::vector<std::string>>();
    r.action.environment = pairs_from(j.at("environment"));
    r.action.working_directory = j.at("working_directory").get<std::string>();
    r.action.output_files = j.at("output_files").get<std::vector<std::string>>();
    for (const auto& in : j.at("inputs")) {
      r.action.inputs.push_back({in.at("path").get<std::string>(), text_of(in.at("bytes")), in.at("x").get<bool>()});
    }
    r.action.platform = pairs_from(j.at("platform"));
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string encode_reply(const std::variant<Failure, ActionOutcome>& reply) {
  if (const auto* f = std::get_if<Failure>(&reply)) return to_cbor(failure_of(*f));
  const auto& o = std::get<ActionOutcome>(reply);
  json outputs = json::array();
  for (const auto& f : o.outputs) outputs.push_back({{"path", f.path}, {"bytes", bytes_of(f.bytes)}});
  return to_cbor({{"outcome",
                   {{"exit_code", o.exit_code},
                    {"out", bytes_of(o.out)},
                    {"err", bytes_of(o.err)},
                    {"outputs", outputs},
                    {"worker", o.worker},
                    {"cached", o.cached}}}});
}

std::string encode_reply(const std::variant<Failure, Capabilities>& reply) {
  if (const auto* f = std::get_if<Failure>(&reply)) return to_cbor(failure_of(*f));
  const auto& c = std::get<Capabilities>(reply);
  return to_cbor({{"capabilities",
                   {{"execution_enabled", c.execution_enabled},
                    {"sha256", c.sha256},
                    {"max_batch_bytes", c.max_batch_bytes},
                    {"api_low", c.api_low},
                    {"api_high", c.api_high}}}});
}

std::optional<std::variant<Failure, ActionOutcome>> decode_outcome_reply(std::string_view bytes) {
  try {
    const json j = from_cbor(bytes);
    if (!j.is_object()) return std::nullopt;
    if (j.contains("failure")) return failure_from(j.at("failure"));
    const json& o = j.at("outcome");
    ActionOutcome out;
    out.exit_code = o.at("exit_code").get<int>();
    out.out = text_of(o.at("out"));
    out.err = text_of(o.at("err"));
    for (const auto& f : o.at("outputs")) out.outputs.push_back({f.at("path").get<std::string>(), text_of(f.at("bytes"))});
    out.worker = o.at("worker").get<std::string>();
    out.cached = o.at("cached").get<bool>();
    return out;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::optional<std::variant<Failure, Capabilities>> decode_capabilities_reply(std::string_view bytes) {
  try {
    const json j = from_cbor(bytes);
    if (!j.is_object()) return std::nullopt;
    if (j.contains("failure")) return failure_from(j.at("failure"));
    const json& c = j.at("capabilities");
    Capabilities out;
    out.execution_enabled = c.at("execution_enabled").get<bool>();
    out.sha256 = c.at("sha256").get<bool>();
    out.max_batch_bytes = c.at("max_batch_bytes").get<std::int64_t>();
    out.api_low = c.at("api_low").get<std::string>();
    out.api_high = c.at("api_high").get<std::string>();
    return out;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string encode_worker_settings(const WorkerSettings& s) {
  return json({{"server", settings_of(s.server)},
               {"bot_id", s.bot_id},
               {"properties", pairs_of(s.properties)},
               {"work_dir", s.work_dir},
               {"max_actions", s.max_actions}})
      .dump();
}

std::optional<WorkerSettings> decode_worker_settings(std::string_view json_text) {
  try {
    const json j = json::parse(json_text);
    WorkerSettings s;
    s.server = settings_from(j.at("server"));
    s.bot_id = j.at("bot_id").get<std::string>();
    s.properties = pairs_from(j.at("properties"));
    s.work_dir = j.at("work_dir").get<std::string>();
    s.max_actions = j.at("max_actions").get<std::uint64_t>();
    return s;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace kache::remote_exec
