#include "tests/e2e/test_server.h"

#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>

#include <thread>

#include "google/protobuf/unknown_field_set.h"

namespace tessera::e2e {

server::DaemonConfig test_config() {
  server::DaemonConfig c;
  c.listen = "127.0.0.1:0";
  c.admin_listen = "127.0.0.1:0";
  c.openai_listen = "127.0.0.1:0";
  c.model = default_model_path();
  c.kv_cache_bytes = 256ll * 1024 * 1024;
  c.max_model_len = 2048;
  c.max_message_bytes = 256 * 1024;
  c.drain_timeout_seconds = 10;
  c.log_level = "warn";
  return c;
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  args.SetMaxSendMessageSize(64 * 1024 * 1024);
  // Distinct channels for servers in one process: no subchannel sharing surprises.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<TestServer> TestServer::start(server::DaemonConfig config, bool load) {
  auto s = std::unique_ptr<TestServer>(new TestServer());
  s->daemon_ = std::make_unique<server::Daemon>(std::move(config));
  if (absl::Status st = s->daemon_->start(); !st.ok()) {
    ADD_FAILURE() << "server start: " << st;
    return nullptr;
  }
  s->channel_ = make_channel(s->address());
  s->generation_ = v1::Generation::NewStub(s->channel_);
  s->admin_ = v1::Admin::NewStub(s->channel_);
  if (load) {
    if (absl::Status st = s->daemon_->load_model(); !st.ok()) {
      ADD_FAILURE() << "model load: " << st;
      return nullptr;
    }
  }
  return s;
}

std::string TestServer::address() const { return "127.0.0.1:" + std::to_string(daemon_->port()); }

v1::ServerStatus TestServer::status() {
  grpc::ClientContext ctx;
  v1::ServerStatus status;
  const grpc::Status s = admin_->GetStatus(&ctx, v1::GetStatusRequest(), &status);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return status;
}

v1::ModelInfo TestServer::model_info() {
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  const grpc::Status s = generation_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

v1::ServerStatus TestServer::wait_status(const std::function<bool(const v1::ServerStatus&)>& done,
                                         std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  v1::ServerStatus s = status();
  while (!done(s) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = status();
  }
  return s;
}

bool TestServer::wait_idle(std::chrono::milliseconds timeout) {
  const v1::ServerStatus s = wait_status(
      [](const v1::ServerStatus& s) {
        return s.running_requests() == 0 && s.waiting_requests() == 0 && s.kv_cache_blocks_used() == 0;
      },
      timeout);
  return s.running_requests() == 0 && s.waiting_requests() == 0 && s.kv_cache_blocks_used() == 0;
}

v1::GenerateRequest greedy_request(const std::string& prompt, int max_tokens, bool exact) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  r.mutable_stopping()->set_ignore_eos(exact);
  return r;
}

UnaryResult generate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                     std::optional<std::chrono::milliseconds> timeout) {
  grpc::ClientContext ctx;
  if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
  UnaryResult r;
  r.status = stub.Generate(&ctx, request, &r.response);
  return r;
}

StreamResult generate_stream(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                             std::optional<std::chrono::milliseconds> timeout) {
  grpc::ClientContext ctx;
  if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
  StreamResult r;
  std::unique_ptr<grpc::ClientReader<v1::GenerateStreamChunk>> reader = stub.GenerateStream(&ctx, request);
  v1::GenerateStreamChunk chunk;
  while (reader->Read(&chunk)) {
    r.text += chunk.text();
    r.token_ids.insert(r.token_ids.end(), chunk.token_ids().begin(), chunk.token_ids().end());
    r.chunks.push_back(chunk);
  }
  r.status = reader->Finish();
  return r;
}

namespace {

std::string encode_string_field(int number, const std::string& value) {
  std::string out;
  out += static_cast<char>((number << 3) | 2);
  size_t n = value.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    out += static_cast<char>(b | (n ? 0x80 : 0));
  } while (n);
  return out + value;
}

std::string to_string(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer to_buffer(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

int health_check(grpc::Channel& channel, const std::string& service) {
  // HealthCheckRequest { string service = 1; } -> HealthCheckResponse { ServingStatus status = 1; }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer response;
  const grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      &channel, grpc::internal::RpcMethod("/grpc.health.v1.Health/Check", grpc::internal::RpcMethod::NORMAL_RPC),
      &ctx, to_buffer(encode_string_field(1, service)), &response);
  if (!s.ok()) return s.error_code() == grpc::StatusCode::NOT_FOUND ? 3 : -1;
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(to_string(response))) return -1;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1) return static_cast<int>(fields.field(i).varint());
  }
  return 0;
}

std::vector<std::string> reflection_services(grpc::Channel& channel) {
  // ServerReflectionRequest { list_services = 7 } -> ServerReflectionResponse
  //   { list_services_response = 6 { repeated ServiceResponse service = 1 { string name = 1 } } }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          &channel,
          grpc::internal::RpcMethod("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &ctx));
  std::vector<std::string> names;
  if (!stream->Write(to_buffer(encode_string_field(7, "")))) return names;
  stream->WritesDone();
  grpc::ByteBuffer response;
  while (stream->Read(&response)) {
    google::protobuf::UnknownFieldSet fields;
    if (!fields.ParseFromString(to_string(response))) continue;
    for (int i = 0; i < fields.field_count(); ++i) {
      if (fields.field(i).number() != 6) continue;
      google::protobuf::UnknownFieldSet list;
      if (!list.ParseFromString(fields.field(i).length_delimited())) continue;
      for (int j = 0; j < list.field_count(); ++j) {
        google::protobuf::UnknownFieldSet service;
        if (list.field(j).number() == 1 && service.ParseFromString(list.field(j).length_delimited())) {
          for (int k = 0; k < service.field_count(); ++k) {
            if (service.field(k).number() == 1) names.push_back(service.field(k).length_delimited());
          }
        }
      }
    }
  }
  (void)stream->Finish();
  return names;
}

}  // namespace tessera::e2e
