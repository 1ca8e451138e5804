#include "parallel/shadows.hpp"

#include <gtest/gtest.h>

#include <random>

#include "base/strings.hpp"
#include "tests/common/test_util.hpp"

using namespace meshloom;
using namespace meshloom::parallel;

namespace {

std::set<std::string> nodes_of(const ShadowPlan& p) {
  std::set<std::string> out;
  for (const auto& [r, h] : p.host) out.insert(h);
  return out;
}

}  // namespace

TEST(Shadows, HeaderExample) {
  ShadowPlan p = plan_shadows({1, 2, 3, 4, 5}, {"vm-a", "vm-a", "vm-a", "vm-b", "vm-b"});
  EXPECT_EQ(p.order, (std::vector<int>{1, 4, 2, 5, 3}));
  EXPECT_EQ(p.shadow, (std::map<int, int>{{1, 4}, {2, 5}, {3, 4}, {4, 2}, {5, 3}}));
  EXPECT_EQ(p.shadowed_by(4), (std::vector<int>{1, 3}));
  EXPECT_EQ(p.describe(),
            "loader ranks 1,2,3 (vm-a), 4,5 (vm-b); shadows 1->4, 2->5, 3->4, 4->2, 5->3");
  const std::set<int> vm_a{1, 2, 3};
  EXPECT_EQ(p.route(1, vm_a), 4);
  EXPECT_EQ(p.route(2, vm_a), 5);
  EXPECT_EQ(p.route(3, vm_a), 4);
  EXPECT_EQ(p.route(4, vm_a), 4);  // alive: serves itself
}

TEST(Shadows, OneNodeIsTheRing) {
  ShadowPlan p = plan_shadows({1, 2, 3}, {"h", "h", "h"});
  EXPECT_EQ(p.order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(p.shadow, (std::map<int, int>{{1, 2}, {2, 3}, {3, 1}}));
  EXPECT_EQ(p.describe(), "loader ranks 1,2,3; shadows 1->2, 2->3, 3->1");
  EXPECT_EQ(p.route(3, {3}), 1);
  EXPECT_EQ(p.route(3, {3, 1}), 2);  // the shadow dead too: on round the order
  EXPECT_EQ(p.route(3, {1, 2, 3}), -1);
}

TEST(Shadows, ALoneLoaderShadowsNobody) {
  ShadowPlan p = plan_shadows({2}, {"h"});
  EXPECT_EQ(p.shadow.at(2), 2);
  EXPECT_TRUE(p.shadowed_by(2).empty());
  EXPECT_EQ(p.describe(), "loader rank 2; no shadow (a single loader)");
  EXPECT_EQ(plan_shadows({}, {}).describe(), "no loaders");
}

TEST(Shadows, ThreeAndOne) {
  // Node a holds 3 loaders, node b one: b shadows them all. b sits half-way
  // round, tied with a's second, which the node met first goes before.
  ShadowPlan p = plan_shadows({1, 2, 3, 4}, {"a", "a", "a", "b"});
  EXPECT_EQ(p.order, (std::vector<int>{1, 2, 4, 3}));
  EXPECT_EQ(p.shadow, (std::map<int, int>{{1, 4}, {2, 4}, {3, 4}, {4, 3}}));
  EXPECT_EQ(p.route(4, {4}), 3);
  EXPECT_EQ(p.route(2, {1, 2, 3}), 4);
  EXPECT_EQ(p.describe(), "loader ranks 1,2,3 (a), 4 (b); shadows 1->4, 2->4, 3->4, 4->3");
}

TEST(Shadows, HostsInterleavedByRankAreNamedPerRun) {
  ShadowPlan p = plan_shadows({1, 2, 3}, {"a", "b", "a"});
  EXPECT_EQ(p.describe(), "loader ranks 1 (a), 2 (b), 3 (a); shadows 1->2, 2->3, 3->2");
}

TEST(Shadows, LayoutTakesTheLoadersHosts) {
  RoleLayout l;
  l.world = 7;
  l.constructors = 1;
  l.loaders = 4;
  l.trainers = 2;
  ShadowPlan p = loader_shadows(l, {"a", "a", "a", "b", "b", "b", "b"});
  EXPECT_EQ(p.shadow, (std::map<int, int>{{1, 3}, {2, 4}, {3, 2}, {4, 1}}));
  EXPECT_EQ(loader_shadows(l, {}).shadow, (std::map<int, int>{{1, 2}, {2, 3}, {3, 4}, {4, 1}}));
}

// Random host assignments: 1-5 nodes, 1-12 loaders, unequal counts, blocks or
// scattered by rank.
TEST(Shadows, PropertiesOverRandomPlacements) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 5000; ++trial) {
    const int nodes = 1 + int(rng() % 5), L = 1 + int(rng() % 12), first = 1 + int(rng() % 3);
    std::vector<int> ranks;
    std::vector<std::string> hosts;
    for (int l = 0; l < L; ++l) {
      ranks.push_back(first + l);
      hosts.push_back(strf("n%d", int(rng() % unsigned(nodes))));
    }
    if (trial % 2) std::sort(hosts.begin(), hosts.end());  // block placement
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << plan_shadows(ranks, hosts).describe());
    const ShadowPlan p = plan_shadows(ranks, hosts);
    const bool many = nodes_of(p).size() > 1;
    std::vector<int> sorted = p.order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, ranks);  // the order is a permutation of the loaders
    std::map<int, int> load;
    for (int i = 0; i < L; ++i) {
      const int r = ranks[size_t(i)], s = p.shadow.at(r);
      if (L > 1) {
        EXPECT_NE(s, r);  // (a)
      }
      if (many) {
        EXPECT_NE(p.host.at(s), p.host.at(r));  // (b)
      } else {
        EXPECT_EQ(s, ranks[size_t((i + 1) % L)]);  // (c)
      }
      ++load[s];
    }
    // (d) a lost node: each of its loaders is served by its shadow, alive on another node.
    for (const auto& node : nodes_of(p)) {
      std::set<int> dead;
      for (const auto& [r, h] : p.host)
        if (h == node) dead.insert(r);
      for (int r : dead) {
        const int by = p.route(r, dead);
        if (!many) {
          EXPECT_EQ(by, -1);
          continue;
        }
        EXPECT_EQ(by, p.shadow.at(r));
        EXPECT_FALSE(dead.count(by));
        EXPECT_NE(p.host.at(by), node);
      }
    }
    // Any dead set: a live loader serves itself; a dead one goes to its
    // shadow while that lives, else to some live loader; -1 only when all died.
    for (int k = 0; k < 4; ++k) {
      std::set<int> dead;
      for (int r : ranks)
        if (rng() % 3 == 0) dead.insert(r);
      for (int r : ranks) {
        const int by = p.route(r, dead);
        if (!dead.count(r)) {
          EXPECT_EQ(by, r);
        }
        if (dead.size() == ranks.size()) {
          EXPECT_EQ(by, -1);
          continue;
        }
        EXPECT_FALSE(dead.count(by));
        if (dead.count(r) && !dead.count(p.shadow.at(r))) {
          EXPECT_EQ(by, p.shadow.at(r));
        }
      }
    }
    // Two nodes of a >= b loaders: no loader shadows more than ceil(a / b).
    if (nodes_of(p).size() == 2) {
      std::map<std::string, int> count;
      for (const auto& [r, h] : p.host) ++count[h];
      const int a = std::max(count.begin()->second, count.rbegin()->second);
      const int b = std::min(count.begin()->second, count.rbegin()->second);
      for (const auto& [s, n] : load) EXPECT_LE(n, (a + b - 1) / b) << "shadow " << s;
    }
  }
}

TEST(Shadows, MismatchedInputIsAnError) {
  test::ThrowOnFatal throws;
  EXPECT_THROW(plan_shadows({1, 2}, {"a"}), Error);
  EXPECT_THROW(plan_shadows({1, 1}, {"a", "a"}), Error);
  EXPECT_THROW(plan_shadows({1, 2}, {"a", "a"}).route(3, {}), Error);
}
