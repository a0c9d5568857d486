#include "server/proto_codec.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "runtime/tokenizer/utf8.h"

namespace tessera::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Walks an encoded message with its descriptor, without protobuf's UTF-8 checks.
std::string find_in(const UnknownFieldSet& fields, const Descriptor& descriptor,
                    const std::string& prefix, int depth) {
  if (depth > 32) return "";
  std::map<int, int> seen;  // field number -> occurrences so far (the index of repeated fields)
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    const FieldDescriptor* fd = descriptor.FindFieldByNumber(f.number());
    const int index = seen[f.number()]++;
    if (fd == nullptr || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    std::string path = prefix.empty() ? fd->name() : absl::StrCat(prefix, ".", fd->name());
    if (fd->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      absl::Status s = validate_utf8(f.length_delimited());
      if (!s.ok()) return absl::StrCat(path, ": ", std::string(s.message()));
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet nested;
      if (!nested.ParseFromString(f.length_delimited())) continue;
      std::string found = find_in(nested, *fd->message_type(), path, depth + 1);
      if (!found.empty()) return found;
    }
  }
  return "";
}

}  // namespace

std::string find_invalid_utf8_field(const std::string& wire, const Descriptor& descriptor) {
  UnknownFieldSet fields;
  if (!fields.ParseFromString(wire)) return "";
  return find_in(fields, descriptor, "", 0);
}

absl::Status parse_request(const grpc::ByteBuffer& buffer, google::protobuf::Message& message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("request: cannot read the message");
  std::string wire;
  wire.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (message.ParseFromString(wire)) return absl::OkStatus();
  const std::string field = find_invalid_utf8_field(wire, *message.GetDescriptor());
  if (!field.empty()) return absl::InvalidArgumentError(field);
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ", message.GetDescriptor()->full_name(), " message"));
}

absl::Status serialize_response(const google::protobuf::Message& message, grpc::ByteBuffer& buffer) {
  bool own = false;
  grpc::ByteBuffer out;
  const grpc::Status s =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, &out, &own);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("cannot serialize ", message.GetDescriptor()->full_name(),
                                            ": ", s.error_message()));
  }
  buffer.Swap(&out);
  return absl::OkStatus();
}

}  // namespace tessera::server
