// ParseTopKRequest: the scores stay in gRPC's slices, every other field is parsed by protobuf, and
// what parses (and how) is exactly what protobuf's own parser says, however the message is sliced.
#include "server/admission.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/slice.h"

namespace pkserve {
namespace {

// `bytes` as one gRPC message of slices cut every `cut` bytes (0: one slice).
grpc::ByteBuffer Message(const std::string& bytes, size_t cut) {
  std::vector<grpc::Slice> slices;
  const size_t step = cut == 0 ? bytes.size() : cut;
  for (size_t begin = 0; begin < bytes.size(); begin += step) {
    slices.emplace_back(bytes.data() + begin, std::min(step, bytes.size() - begin));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(const ReceivedTopK& received) {
  std::string joined;
  for (const std::span<const std::byte> piece : received.scores) {
    joined.append(reinterpret_cast<const char*>(piece.data()), piece.size());
  }
  return joined;
}

v1::TopKRequest SampleRequest(size_t score_bytes, std::mt19937_64& engine) {
  v1::TopKRequest request;
  request.add_factor_widths(32);
  request.add_factor_widths(16);
  request.set_k(8);
  request.set_dtype(v1::DTYPE_BFLOAT16);
  request.set_rows(3);
  request.set_request_id("caller-7");
  std::string scores(score_bytes, '\0');
  for (char& c : scores) c = static_cast<char>(engine());
  request.set_scores(scores);
  return request;
}

// ParseTopKRequest against protobuf's parser on the same bytes: the same verdict, and when both
// parse, the same message (scores rejoined from the pieces), unknown fields included.
void ExpectSameAsProtobuf(const std::string& bytes, size_t cut, const char* what) {
  v1::TopKRequest expected;
  const bool protobuf_parses = expected.ParseFromString(bytes);
  grpc::ByteBuffer message = Message(bytes, cut);
  ReceivedTopK received;
  const absl::Status status = ParseTopKRequest(message, &received);
  ASSERT_EQ(status.ok(), protobuf_parses) << what << ", slices of " << cut << ": " << status;
  if (!status.ok()) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  EXPECT_EQ(received.scores.bytes(), expected.scores().size());
  v1::TopKRequest actual = received.request;
  actual.set_scores(Joined(received));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(actual, expected))
      << what << ", slices of " << cut << ":\n"
      << actual.ShortDebugString() << "\nagainst\n"
      << expected.ShortDebugString();
}

TEST(ParseTopKRequest, LeavesTheScoresInTheSlicesHoweverTheMessageIsCut) {
  std::mt19937_64 engine(3);
  const v1::TopKRequest request = SampleRequest(3 * 48 * 2, engine);
  const std::string bytes = request.SerializeAsString();
  for (const size_t cut : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{200}}) {
    grpc::ByteBuffer message = Message(bytes, cut);
    ReceivedTopK received;
    ASSERT_TRUE(ParseTopKRequest(message, &received).ok()) << "slices of " << cut;
    EXPECT_TRUE(received.request.scores().empty()) << "the scores were copied out of the slices";
    EXPECT_EQ(Joined(received), request.scores());
    EXPECT_EQ(received.request.k(), 8u);
    EXPECT_EQ(received.request.rows(), 3u);
    EXPECT_EQ(received.request.request_id(), "caller-7");
    EXPECT_EQ(received.request.factor_widths_size(), 2);
    // The pieces point into the slices, which `received` holds: the message may go.
    message.Clear();
    EXPECT_EQ(Joined(received), request.scores());
  }
}

TEST(ParseTopKRequest, TheLastScoresFieldCountsAsInProtobuf) {
  std::mt19937_64 engine(5);
  v1::TopKRequest first = SampleRequest(10, engine);
  v1::TopKRequest second;
  second.set_scores("the second scores");
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  for (const size_t cut : {size_t{0}, size_t{3}}) {
    ExpectSameAsProtobuf(bytes, cut, "two scores fields");
    grpc::ByteBuffer message = Message(bytes, cut);
    ReceivedTopK received;
    ASSERT_TRUE(ParseTopKRequest(message, &received).ok());
    EXPECT_EQ(Joined(received), "the second scores");
  }
}

TEST(ParseTopKRequest, EmptyMessageIsAnEmptyRequest) {
  grpc::ByteBuffer empty;
  ReceivedTopK received;
  ASSERT_TRUE(ParseTopKRequest(empty, &received).ok());
  EXPECT_EQ(received.scores.bytes(), 0u);
  EXPECT_EQ(received.request.rows(), 0u);
}

TEST(ParseTopKRequest, AcceptsAndRejectsExactlyWhatProtobufDoes) {
  // Damaged request ids are not UTF-8, which protobuf logs on every parse; both parsers see it.
  google::protobuf::LogSilencer quiet;
  std::mt19937_64 engine(17);
  const std::string valid = SampleRequest(96, engine).SerializeAsString();
  // Hand-made cases: unknown fields of every wire type, scores sent with the wrong wire type, a
  // truncated scores field, a group, field number 0, an overlong varint.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown varint, fixed64, bytes, fixed32",
       valid + std::string("\xa0\x06\x2a\xa9\x06", 5) + std::string(8, 'x') +
           std::string("\xb2\x06\x03" "abc\xbd\x06" "wxyz", 12)},
      {"scores as a varint", std::string("\x28\x05", 2) + valid},
      {"scores cut short", valid + std::string("\x2a\x10" "short", 7)},
      {"a group", valid + std::string("\xa3\x06\xa4\x06", 4)},
      {"field number 0", std::string("\x02\x01x", 3) + valid},
      {"an eleven-byte varint",
       std::string("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12) + valid},
      {"a length past the end", valid + std::string("\x3a\xff\xff\xff\x0f", 5)},
      {"scores with a six-byte tag", valid + std::string("\xaa\x80\x80\x80\x80\x00\x02hi", 9)},
      {"scores with a five-byte tag", valid + std::string("\xaa\x80\x80\x80\x00\x02hi", 8)},
      {"scores with a ten-byte length",
       valid + std::string("\x2a\x82\x80\x80\x80\x80\x80\x80\x80\x80\x00hi", 13)},
  };
  for (const auto& [what, bytes] : cases) {
    for (const size_t cut : {size_t{0}, size_t{1}, size_t{5}}) {
      ExpectSameAsProtobuf(bytes, cut, what.c_str());
    }
  }
  // Random damage to a valid message: flipped, dropped and inserted bytes, and truncation.
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(engine() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = engine() % bytes.size();
      switch (engine() % 4) {
        case 0:
          bytes[at] = static_cast<char>(engine());
          break;
        case 1:
          bytes.erase(at, 1);
          break;
        case 2:
          bytes.insert(at, 1, static_cast<char>(engine()));
          break;
        default:
          bytes.resize(at);
          break;
      }
    }
    ExpectSameAsProtobuf(bytes, engine() % 3 == 0 ? 0 : 1 + engine() % 40, "damaged");
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace pkserve
