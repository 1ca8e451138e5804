#include "plan/cache_relabel.hpp"

#include <algorithm>
#include <numeric>

#include "base/check.hpp"

namespace meshloom::plan {

namespace {

class Relabeling {
 public:
  Relabeling(int32_t trainers, std::span<const int32_t> nodes)
      : new_rank_(size_t(trainers), -1), taken_(size_t(trainers), false), nodes_(nodes) {}

  // Maps the unmapped ranks of `group` (sorted) onto `set` (sorted) if the
  // ranks it already has lie in `set` and the rest pair up, free and node
  // for node. Returns whether it did.
  bool try_map(const std::vector<int32_t>& group, const std::vector<int32_t>& set) {
    std::vector<int32_t> from, to;
    for (int32_t g : group) {
      if (new_rank_[size_t(g)] < 0)
        from.push_back(g);
      else if (!std::binary_search(set.begin(), set.end(), new_rank_[size_t(g)]))
        return false;
    }
    for (int32_t s : set)
      if (std::find_if(group.begin(), group.end(),
                       [&](int32_t g) { return new_rank_[size_t(g)] == s; }) == group.end()) {
        if (taken_[size_t(s)]) return false;
        to.push_back(s);
      }
    if (from.size() != to.size()) return false;
    // Pair in sorted order, node by node.
    const auto by_node = [&](int32_t a, int32_t b) {
      return std::pair(node(a), a) < std::pair(node(b), b);
    };
    std::sort(from.begin(), from.end(), by_node);
    std::sort(to.begin(), to.end(), by_node);
    for (size_t i = 0; i < from.size(); ++i)
      if (node(from[i]) != node(to[i])) return false;
    for (size_t i = 0; i < from.size(); ++i) assign(from[i], to[i]);
    return true;
  }

  // Leftover ranks: their own number where free, else the lowest free of their node.
  std::vector<int32_t> finish() {
    const int32_t T = int32_t(new_rank_.size());
    for (int32_t r = 0; r < T; ++r) {
      if (new_rank_[size_t(r)] >= 0) continue;
      int32_t target = r;
      if (taken_[size_t(r)])
        for (target = 0; target < T; ++target)
          if (!taken_[size_t(target)] && node(target) == node(r)) break;
      ML_CHECK(target < T, "no free rank of the node left to relabel to");
      assign(r, target);
    }
    return new_rank_;
  }

 private:
  int32_t node(int32_t rank) const { return nodes_.empty() ? 0 : nodes_[size_t(rank)]; }
  void assign(int32_t from, int32_t to) {
    new_rank_[size_t(from)] = to;
    taken_[size_t(to)] = true;
  }

  std::vector<int32_t> new_rank_;
  std::vector<bool> taken_;
  std::span<const int32_t> nodes_;
};

}  // namespace

std::vector<int32_t> cache_relabeling(const Plan& plan,
                                      const std::vector<std::vector<int32_t>>& cached,
                                      std::span<const int32_t> node_of_rank) {
  ML_CHECK(node_of_rank.empty() || int32_t(node_of_rank.size()) == plan.trainers,
           "one node per HDP rank");
  // The plan's distinct member sets of two or more, widest first, then in plan order.
  std::vector<std::vector<int32_t>> groups;
  for (int32_t seq = 0; seq < plan.sequences(); ++seq) {
    if (plan.group_size(seq) < 2) continue;
    std::vector<int32_t> g(plan.group(seq).begin(), plan.group(seq).end());
    std::sort(g.begin(), g.end());
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(std::move(g));
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  Relabeling r(plan.trainers, node_of_rank);
  // Groups cached as they are stay (identities never conflict); the others
  // take a cached set, most recent first.
  std::vector<const std::vector<int32_t>*> rest;
  for (const auto& g : groups)
    if (std::find(cached.begin(), cached.end(), g) == cached.end() || !r.try_map(g, g))
      rest.push_back(&g);
  for (const auto* g : rest)
    for (const auto& set : cached)
      if (set.size() == g->size() && set.back() < plan.trainers && r.try_map(*g, set)) break;
  return r.finish();
}

Plan relabel_ranks(const Plan& plan, std::span<const int32_t> new_rank) {
  const int32_t T = plan.trainers;
  ML_CHECK(int32_t(new_rank.size()) == T, "one new rank per HDP rank");
  std::vector<int32_t> old_of(size_t(T), -1);
  for (int32_t r = 0; r < T; ++r) {
    ML_CHECK(new_rank[size_t(r)] >= 0 && new_rank[size_t(r)] < T &&
                 old_of[size_t(new_rank[size_t(r)])] < 0,
             "a relabeling must be a permutation of the HDP ranks");
    old_of[size_t(new_rank[size_t(r)])] = r;
  }
  Plan out = plan;
  for (int32_t& m : out.members) m = new_rank[size_t(m)];
  // Micro-batches (and their pieces, which run contiguous) in the new trainer order.
  out.micro_batches.clear();
  out.pieces.clear();
  out.trainer_begin.assign(1, 0);
  for (int32_t t = 0; t < T; ++t) {
    for (MicroBatch mb : plan.micro_batches_of(old_of[size_t(t)])) {
      const auto pieces = plan.pieces_of(mb);
      mb.piece_begin = int32_t(out.pieces.size());
      out.pieces.insert(out.pieces.end(), pieces.begin(), pieces.end());
      mb.piece_end = int32_t(out.pieces.size());
      out.micro_batches.push_back(mb);
    }
    out.trainer_begin.push_back(int32_t(out.micro_batches.size()));
  }
  return out;
}

}  // namespace meshloom::plan
