// Fuzzes what kache reads back from kache-reapi (remote_exec/wire.hpp): arbitrary bytes as a reply to
// `execute` and to `capabilities`, and as a request. Properties: decoding never throws, and what decodes
// encodes to bytes that decode to the same fields.
#include <string>

#include "fuzz_check.hpp"
#include "remote_exec/wire.hpp"

using namespace kache::remote_exec;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = kache::fuzz::as_view(data, size);
  if (auto reply = decode_outcome_reply(bytes)) {
    auto again = decode_outcome_reply(encode_reply(*reply));
    KACHE_FUZZ_CHECK(again.has_value() && again->index() == reply->index());
    if (auto* o = std::get_if<ActionOutcome>(&*reply)) {
      const auto& a = std::get<ActionOutcome>(*again);
      KACHE_FUZZ_CHECK(a.exit_code == o->exit_code && a.out == o->out && a.outputs.size() == o->outputs.size());
    }
  }
  if (auto reply = decode_capabilities_reply(bytes)) {
    auto again = decode_capabilities_reply(encode_reply(*reply));
    KACHE_FUZZ_CHECK(again.has_value() && again->index() == reply->index());
  }
  if (auto request = decode_request(bytes)) {
    auto again = decode_request(encode_request(request->settings, request->action));
    KACHE_FUZZ_CHECK(again.has_value() && again->action.arguments == request->action.arguments &&
                     again->action.inputs.size() == request->action.inputs.size());
  }
  return 0;
}
