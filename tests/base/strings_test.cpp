#include "base/strings.hpp"

#include <gtest/gtest.h>

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
