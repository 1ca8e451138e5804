#include "parallel/shadows.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "parallel/nodes.hpp"

namespace meshloom::parallel {

namespace {

// Where a loader sits round the ring: the k-th of a node's n loaders at
// (2k + 1) / 2n, kept as a fraction so that ties compare exactly.
struct Place {
  int64_t num, den;
  int node;  // index of the node, in the order nodes are first met
  int rank;
};

bool before(const Place& a, const Place& b) {
  const int64_t lhs = a.num * b.den, rhs = b.num * a.den;
  if (lhs != rhs) return lhs < rhs;
  return a.node < b.node;
}

}  // namespace

ShadowPlan plan_shadows(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  ML_CHECK(ranks.size() == hosts.size(),
           strf("%zu loader ranks but %zu host names", ranks.size(), hosts.size()));
  ShadowPlan plan;
  const NodeIndex nodes = index_nodes(hosts);
  std::vector<std::vector<int>> on_node(nodes.names.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    ML_CHECK(plan.host.emplace(ranks[i], hosts[i]).second,
             strf("loader rank %d is listed twice", ranks[i]));
    on_node[size_t(nodes.node[i])].push_back(ranks[i]);
  }
  std::vector<Place> places;
  for (size_t h = 0; h < on_node.size(); ++h) {
    const int64_t n = int64_t(on_node[h].size());
    for (int64_t k = 0; k < n; ++k)
      places.push_back({2 * k + 1, 2 * n, int(h), on_node[h][size_t(k)]});
  }
  std::stable_sort(places.begin(), places.end(), before);
  for (const auto& p : places) plan.order.push_back(p.rank);
  const size_t L = plan.order.size();
  for (size_t i = 0; i < L; ++i) {
    const int me = plan.order[i];
    // The first loader after this one on another node; with one node, the next.
    int shadow = plan.order[(i + 1) % L];
    for (size_t k = 1; k < L; ++k) {
      const int r = plan.order[(i + k) % L];
      if (plan.host[r] != plan.host[me]) {
        shadow = r;
        break;
      }
    }
    plan.shadow[me] = shadow;
  }
  return plan;
}

ShadowPlan loader_shadows(const RoleLayout& layout, const std::vector<std::string>& hosts) {
  std::vector<int> ranks;
  std::vector<std::string> names;
  for (int l = 0; l < layout.loaders; ++l) {
    const int r = layout.first_rank(Role::loader) + l;
    ranks.push_back(r);
    names.push_back(size_t(r) < hosts.size() ? hosts[size_t(r)] : std::string());
  }
  return plan_shadows(ranks, names);
}

std::vector<int> ShadowPlan::shadowed_by(int rank) const {
  std::vector<int> out;
  for (int r : order)
    if (r != rank && shadow.at(r) == rank) out.push_back(r);
  return out;
}

int ShadowPlan::route(int rank, const std::set<int>& dead) const {
  const auto me = shadow.find(rank);
  ML_CHECK(me != shadow.end(), strf("rank %d is not a loader", rank));
  if (!dead.count(rank)) return rank;
  const size_t start = size_t(std::find(order.begin(), order.end(), me->second) - order.begin());
  for (size_t k = 0; k < order.size(); ++k) {
    const int r = order[(start + k) % order.size()];
    if (!dead.count(r)) return r;
  }
  return -1;
}

std::string ShadowPlan::describe() const {
  if (order.empty()) return "no loaders";
  // Ranks ascending, each run of ranks on one node followed by its name
  // (when there are several nodes).
  std::vector<std::string> runs;
  std::string run;
  bool one_node = true;
  for (const auto& [r, h] : host) one_node = one_node && h == host.begin()->second;
  for (auto it = host.begin(); it != host.end(); ++it) {
    run += strf("%s%d", run.empty() ? "" : ",", it->first);
    const auto next = std::next(it);
    if (next != host.end() && (one_node || next->second == it->second)) continue;
    if (!one_node) run += strf(" (%s)", it->second.empty() ? "?" : it->second.c_str());
    runs.push_back(run);
    run.clear();
  }
  const std::string ranks = join(runs, ", ");
  if (order.size() == 1) return strf("loader rank %s; no shadow (a single loader)", ranks.c_str());
  std::vector<std::string> pairs;
  for (const auto& [r, s] : shadow) pairs.push_back(strf("%d->%d", r, s));
  return strf("loader ranks %s; shadows %s", ranks.c_str(), join(pairs, ", ").c_str());
}

}  // namespace meshloom::parallel
