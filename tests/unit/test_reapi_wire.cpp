// What kache and kache-reapi say to each other (remote_exec/wire.hpp): every field survives the trip,
// file bytes with NULs included, the bearer token never travels, and bytes that are not a reply are
// refused (kache then runs the stage here) rather than read.
#include <gtest/gtest.h>

#include "remote_exec/wire.hpp"

using namespace kache::remote_exec;

TEST(ReapiWire, ARequestKeepsEveryFieldButTheToken) {
  ServerSettings s{"grpc://127.0.0.1:1", "main", "/ca.pem", "secret-token", 42};
  ActionSpec a;
  a.arguments = {"/usr/bin/gcc", "-c", "x.c"};
  a.environment = {{"PATH", "/usr/bin"}};
  a.working_directory = "work/p";
  a.output_files = {"x.o"};
  a.inputs = {{"work/p/x.c", std::string("int x;\0\xff", 8), true}};
  a.platform = {{"kache-toolchain", "abc"}};
  const std::string bytes = encode_request(s, a);
  EXPECT_EQ(bytes.find("secret-token"), std::string::npos);
  auto r = decode_request(bytes);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->settings.url, s.url);
  EXPECT_EQ(r->settings.instance, "main");
  EXPECT_EQ(r->settings.ca_file, "/ca.pem");
  EXPECT_EQ(r->settings.timeout_s, 42);
  EXPECT_TRUE(r->settings.bearer_token.empty());
  EXPECT_EQ(r->action.arguments, a.arguments);
  EXPECT_EQ(r->action.environment, a.environment);
  EXPECT_EQ(r->action.working_directory, "work/p");
  EXPECT_EQ(r->action.output_files, a.output_files);
  ASSERT_EQ(r->action.inputs.size(), 1u);
  EXPECT_EQ(r->action.inputs[0].bytes, a.inputs[0].bytes);
  EXPECT_TRUE(r->action.inputs[0].executable);
  EXPECT_EQ(r->action.platform, a.platform);
}

TEST(ReapiWire, RepliesRoundTrip) {
  ActionOutcome o;
  o.exit_code = 3;
  o.out = "o";
  o.err = std::string("e\0", 2);
  o.outputs = {{"x.o", std::string("\x7f" "ELF\0", 5)}};
  o.worker = "w1";
  o.cached = true;
  auto back = decode_outcome_reply(encode_reply(std::variant<Failure, ActionOutcome>(o)));
  ASSERT_TRUE(back && std::holds_alternative<ActionOutcome>(*back));
  const auto& b = std::get<ActionOutcome>(*back);
  EXPECT_EQ(b.exit_code, 3);
  EXPECT_EQ(b.err, o.err);
  ASSERT_EQ(b.outputs.size(), 1u);
  EXPECT_EQ(b.outputs[0].bytes, o.outputs[0].bytes);
  EXPECT_EQ(b.worker, "w1");
  EXPECT_TRUE(b.cached);

  auto failed = decode_outcome_reply(encode_reply(std::variant<Failure, ActionOutcome>(Failure{"refused", "why"})));
  ASSERT_TRUE(failed && std::holds_alternative<Failure>(*failed));
  EXPECT_EQ(std::get<Failure>(*failed).reason, "refused");

  Capabilities c{true, true, 4096, "2.0", "2.3"};
  auto caps = decode_capabilities_reply(encode_reply(std::variant<Failure, Capabilities>(c)));
  ASSERT_TRUE(caps && std::holds_alternative<Capabilities>(*caps));
  EXPECT_EQ(std::get<Capabilities>(*caps).max_batch_bytes, 4096);
  EXPECT_EQ(std::get<Capabilities>(*caps).api_high, "2.3");
}

TEST(ReapiWire, OtherBytesAreRefused) {
  for (std::string bytes : {std::string(), std::string("not cbor"), std::string("\xa1\x61x\x01", 4)}) {
    EXPECT_FALSE(decode_outcome_reply(bytes)) << bytes;
    EXPECT_FALSE(decode_capabilities_reply(bytes)) << bytes;
    EXPECT_FALSE(decode_request(bytes)) << bytes;
  }
  EXPECT_FALSE(decode_worker_settings("{"));
  EXPECT_FALSE(decode_worker_settings("{\"server\": 1}"));
}

TEST(ReapiWire, WorkerSettingsRoundTrip) {
  WorkerSettings w;
  w.server = {"grpc://h:1", "", "", "token", 9};
  w.bot_id = "b";
  w.properties = {{"kache-toolchain", "t"}, {"OSFamily", "Linux"}};
  w.work_dir = "/tmp/w";
  w.max_actions = 5;
  const std::string text = encode_worker_settings(w);
  EXPECT_EQ(text.find("token"), std::string::npos);
  auto back = decode_worker_settings(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->server.url, "grpc://h:1");
  EXPECT_EQ(back->properties, w.properties);
  EXPECT_EQ(back->work_dir, "/tmp/w");
  EXPECT_EQ(back->max_actions, 5u);
}
