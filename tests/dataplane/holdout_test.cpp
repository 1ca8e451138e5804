// The held-out split (dataplane/holdout.hpp): the share it holds out, that it
// is a function of the source's name and the document alone, and that a
// stream never delivers, nor asks the length of, a held-out document.
#include "dataplane/holdout.hpp"

#include <gtest/gtest.h>

#include <set>

#include "dataplane/stream.hpp"

using namespace meshloom::dataplane;

TEST(Holdout, HoldsOutItsShareByNameAndDocument) {
  const Holdout a("books", 0.2), same("books", 0.2), other("code", 0.2), none;
  int64_t held = 0, differ = 0;
  for (int64_t doc = 0; doc < 100000; ++doc) {
    held += a(doc);
    ASSERT_EQ(a(doc), same(doc));
    differ += a(doc) != other(doc);
    ASSERT_FALSE(none(doc));
  }
  EXPECT_NEAR(double(held) / 100000, 0.2, 0.01);
  EXPECT_GT(differ, 20000);  // another name, another split
  EXPECT_FALSE(Holdout("books", 0)(3));
  // A larger share holds out a superset: growing eval.holdout only adds.
  const Holdout more("books", 0.3);
  for (int64_t doc = 0; doc < 10000; ++doc) {
    if (a(doc)) {
      ASSERT_TRUE(more(doc));
    }
  }
}

TEST(Holdout, StreamsNeverDeliverHeldOutDocuments) {
  for (const int64_t threshold : {int64_t(0), int64_t(50)}) {
    const Holdout holdout("s", 0.25);
    std::set<int64_t> asked, delivered;
    LengthFn len = [&](int, int64_t d) {
      asked.insert(d);
      return 1 + d % 97;
    };
    SourceStream s(0, 9, 400, threshold, holdout);
    for (int i = 0; i < 3000; ++i) {  // several epochs
      Lane lane = threshold > 0 && i % 3 == 0 ? Lane::long_docs : Lane::short_docs;
      if (!s.available(lane, len))
        lane = lane == Lane::long_docs ? Lane::short_docs : Lane::long_docs;
      if (!s.available(lane, len)) lane = Lane::short_docs;  // both used up: a new epoch
      delivered.insert(s.take(lane, 40, len).doc);
    }
    int64_t expected = 0;
    for (int64_t doc = 0; doc < 400; ++doc) {
      EXPECT_FALSE(holdout(doc) && (asked.count(doc) || delivered.count(doc))) << doc;
      expected += !holdout(doc);
    }
    EXPECT_EQ(int64_t(delivered.size()), expected);  // every other document, each epoch
  }
}
