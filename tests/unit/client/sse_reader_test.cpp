#include "client/sse_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace th::client {
namespace {

std::vector<SseEvent> read_all(const std::vector<std::string>& pieces) {
  SseReader reader;
  std::vector<SseEvent> out;
  for (const std::string& p : pieces) {
    Status s = reader.feed(p, [&](const SseEvent& e) {
      out.push_back(e);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return out;
}

std::vector<std::string> data_of(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

TEST(SseReader, DataWithAndWithoutTheSpace) {
  EXPECT_EQ(data_of(read_all({"data: a\n\ndata:b\n\ndata:  c\n\n"})), (std::vector<std::string>{"a", "b", " c"}));
}

TEST(SseReader, DataLinesAreJoinedWithNewlines) {
  EXPECT_EQ(data_of(read_all({"data: one\ndata: two\ndata\ndata: three\n\n"})),
            (std::vector<std::string>{"one\ntwo\n\nthree"}));
}

TEST(SseReader, CommentsAndUnknownFieldsAreIgnored) {
  auto events = read_all({": keep-alive\n\n:comment\ndata: x\nfoo: bar\n\n"});
  EXPECT_EQ(data_of(events), (std::vector<std::string>{"x"}));
}

TEST(SseReader, AnyLineEndCrLfCrLf) {
  EXPECT_EQ(data_of(read_all({"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\n"})),
            (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(SseReader, EventsSplitAcrossPiecesAtEveryByte) {
  const std::string stream = "event: add\r\ndata: 12\r\ndata: 34\r\n\r\nid: 7\rdata: z\r\r: c\ndata: last\n\n";
  const std::vector<SseEvent> whole = read_all({stream});
  ASSERT_EQ(whole.size(), 3u);
  for (size_t split = 0; split <= stream.size(); ++split) {
    std::vector<SseEvent> parts = read_all({stream.substr(0, split), stream.substr(split)});
    ASSERT_EQ(data_of(parts), data_of(whole)) << "split at " << split;
    EXPECT_EQ(parts[0].type, "add");
    EXPECT_EQ(parts[1].id, "7");
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(data_of(read_all(bytes)), (std::vector<std::string>{"12\n34", "z", "last"}));
}

TEST(SseReader, TypeIdAndRetry) {
  auto events = read_all({"event: delta\nid: 42\nretry: 1500\ndata: a\n\ndata: b\n\nretry: x1\ndata: c\n\n"});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, "delta");
  EXPECT_EQ(events[0].id, "42");
  EXPECT_EQ(events[0].retry, 1500);
  EXPECT_EQ(events[1].type, "message");  // the type is per event
  EXPECT_EQ(events[1].id, "42");         // the id carries over
  EXPECT_EQ(events[2].retry, 1500);      // "x1" is not a number: ignored
}

TEST(SseReader, IdWithNulIsIgnored) {
  SseReader reader;
  std::vector<SseEvent> out;
  using namespace std::string_literals;
  const std::string s = "id: 1\ndata: a\n\nid: 2\0003\ndata: b\n\n"s;
  ASSERT_TRUE(reader.feed(s, [&](const SseEvent& e) {
    out.push_back(e);
    return true;
  }).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].id, "1");
}

TEST(SseReader, BlankLineWithoutDataDispatchesNothing) {
  auto events = read_all({"\n\nevent: x\n\ndata: y\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "message");  // the "x" type was reset with its empty event
}

TEST(SseReader, UnfinishedEventAtTheEndIsNotDispatched) {
  EXPECT_TRUE(read_all({"data: a\n\ndata: b\n"}).size() == 1);
}

TEST(SseReader, ByteOrderMarkIsSkippedEvenWhenSplit) {
  EXPECT_EQ(data_of(read_all({"\xEF\xBB", "\xBF" "data: a\n\n"})), (std::vector<std::string>{"a"}));
  EXPECT_EQ(data_of(read_all({"\xEF\xBB\xBF" "data: a\n\n"})), (std::vector<std::string>{"a"}));
  EXPECT_EQ(data_of(read_all({"d", "ata: a\n\n"})), (std::vector<std::string>{"a"}));
}

TEST(SseReader, OpenAiStream) {
  auto events = read_all({"data: {\"choices\":[{\"text\":\"Once\"}]}\n\n", "data: [DONE]\n\n"});
  EXPECT_EQ(data_of(events), (std::vector<std::string>{"{\"choices\":[{\"text\":\"Once\"}]}", "[DONE]"}));
}

TEST(SseReader, StopsWhenTheCallbackSaysSo) {
  SseReader reader;
  int seen = 0;
  ASSERT_TRUE(reader.feed("data: 1\n\ndata: 2\n\ndata: 3\n\n", [&](const SseEvent&) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
  EXPECT_TRUE(reader.stopped());
}

TEST(SseReader, LineOverTheLimitIsAnError) {
  SseReader reader(64);
  auto none = [](const SseEvent&) { return true; };
  EXPECT_TRUE(reader.feed("data: " + std::string(40, 'x'), none).ok());
  EXPECT_FALSE(reader.feed(std::string(40, 'x'), none).ok());
  SseReader joined(64);
  EXPECT_FALSE(joined.feed("data: " + std::string(40, 'x') + "\ndata: " + std::string(40, 'y') + "\n", none).ok());
}

}  // namespace
}  // namespace th::client
