// A thread-safe LRU map from document index to a shared, immutable value,
// bounded by the sum of the values' costs (tokens, bytes): what the raw and
// image sources keep of the documents they prepared.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace meshloom::sources {

template <class V>
class BoundedCache {
 public:
  using Value = std::shared_ptr<const V>;
  explicit BoundedCache(int64_t limit) : limit_(limit) {}

  // The value, or null; a hit makes it the most recent.
  Value find(int64_t key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.at);
    return it->second.value;
  }
  bool contains(int64_t key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.count(key) > 0;
  }
  // Keeps `value` unless another thread was first (then returns that one);
  // evicts the least recent values beyond the limit, never the newest.
  Value insert(int64_t key, Value value, int64_t cost) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second.value;
    lru_.push_front(key);
    map_[key] = {value, cost, lru_.begin()};
    held_ += cost;
    while (held_ > limit_ && lru_.size() > 1) {
      const int64_t old = lru_.back();
      lru_.pop_back();
      held_ -= map_[old].cost;
      map_.erase(old);
    }
    return value;
  }

 private:
  struct Entry {
    Value value;
    int64_t cost = 0;
    std::list<int64_t>::iterator at;
  };
  mutable std::mutex mutex_;
  int64_t limit_;
  int64_t held_ = 0;
  std::unordered_map<int64_t, Entry> map_;
  std::list<int64_t> lru_;
};

}  // namespace meshloom::sources
