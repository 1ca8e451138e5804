#include "base/strings.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace meshloom;

TEST(Strings, SplitJoinRoundTrip) {
  EXPECT_EQ(split("a.b..c", '.'), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(join(split("x,y,z", ','), ","), "x,y,z");
  EXPECT_EQ(split("", '.').size(), 1u);
}

TEST(Strings, EditDistanceAndNearest) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(nearest("seqlen", {"seq_len", "sources", "mode"}), "seq_len");
  EXPECT_EQ(nearest("zzzzzzzz", {"seq_len", "mode"}), "");
}

TEST(Strings, HumanUnits) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_seconds(0.0412), "41 ms");
  EXPECT_EQ(human_seconds(150), "2m30s");
  EXPECT_EQ(strf("%d-%s", 7, "x"), "7-x");
}

TEST(Strings, ShortestTextReadsBackExactlyAndStaysPlain) {
  EXPECT_EQ(shortest_text(0.006), "0.006");
  EXPECT_EQ(shortest_text(6e-4), "0.0006");
  EXPECT_EQ(shortest_text(1e-8), "1e-08");
  EXPECT_EQ(shortest_text(10000), "10000");
  EXPECT_EQ(shortest_text(0.1 + 0.2), "0.30000000000000004");
  for (double v : {0.006, 3e-3 / 7, 1e300, -2.5e-310, 123456789.125})
    EXPECT_EQ(std::strtod(shortest_text(v).c_str(), nullptr), v) << shortest_text(v);
}

TEST(Strings, IndexRunsJoinConsecutiveValues) {
  EXPECT_EQ(index_runs(std::vector<int>{}), "");
  EXPECT_EQ(index_runs(std::vector<int>{4}), "4");
  EXPECT_EQ(index_runs(std::vector<int>{0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(index_runs(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(index_runs(std::vector<int>{1, 3}), "1,3");
}
