// BpeModel, the per-thread piece cache and BpeTokenizer (see bpe.hpp).
#include "tokenizer/bpe.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <queue>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::tokenizer {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Pieces up to this long merge on stack arrays (quadratic but tiny); longer
// ones (long runs of letters or spaces) use a heap, O(n log n).
constexpr size_t kShortPiece = 128;
// Pieces up to this long are memoized per thread.
constexpr size_t kMaxCachedPiece = 64;

// The first min(n, 8) bytes at p as a little-endian word, zero-padded;
// never reads outside [p, p + n).
inline uint64_t load_head(const uint8_t* p, size_t n) {
  if (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (n >= 4) {  // two overlapping 4-byte loads; the shared bytes agree
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return lo | (static_cast<uint64_t>(hi) << (8 * (n - 4)));
  }
  uint64_t v = 0;
  if (n > 0) v = p[0];
  if (n > 1) v |= static_cast<uint64_t>(p[1]) << 8;
  if (n > 2) v |= static_cast<uint64_t>(p[2]) << 16;
  return v;
}

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// A piece's hash and its first 8 bytes. Tables keep the head of each key in
// the slot, so a lookup of a piece of up to 8 bytes (most pieces) touches
// only the slot, not the token bytes elsewhere in memory.
struct PieceKey {
  uint64_t hash, head;
  // Slot check word: length (8 bits, 255 = "255 or more") and 24 hash bits.
  uint32_t tag_len(size_t n) const {
    return static_cast<uint32_t>(hash >> 40) << 8 | static_cast<uint32_t>(n < 255 ? n : 255);
  }
};

inline PieceKey piece_key(const uint8_t* p, size_t n) {
  const uint64_t head = load_head(p, n);
  uint64_t h = (head ^ (0x9E3779B97F4A7C15ull * (n + 1))) * 0x87c37b91114253d5ull;
  size_t i = 8;
  for (; i + 8 <= n; i += 8) {
    h ^= h >> 31;
    h = (h ^ load_head(p + i, 8)) * 0x87c37b91114253d5ull;
  }
  if (i < n) h = (h ^ (h >> 31) ^ load_head(p + i, n - i)) * 0x4cf5ad432745937full;
  return {mix(h), head};
}

inline uint64_t table_size_for(size_t entries) {
  uint64_t size = 16;
  while (size < entries * 2) size <<= 1;  // load factor <= 1/2
  return size;
}

// Equality of two byte strings of length n, inlined for the short strings
// that pieces and tokens are (a libc memcmp call costs more than the compare).
inline bool same_bytes(const uint8_t* a, const uint8_t* b, size_t n) {
  auto load64 = [](const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  auto load32 = [](const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  if (n >= 8) {
    if (n > 16) return std::memcmp(a, b, n) == 0;
    return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Memoized BPE results of pieces, one per (thread, model): no locks, no
// sharing. 64K entries hold the distinct non-token pieces of ~10 MB of
// English text (the python docs have 34K); when full it is cleared, which
// keeps memory bounded (~4 MiB per thread).
class PieceCache {
 public:
  bool find(const uint8_t* p, size_t n, const PieceKey& key, std::vector<int32_t>* out) const {
    if (slots_.empty()) return false;
    const uint32_t tag_len = key.tag_len(n);
    for (size_t i = key.hash & kMask;; i = (i + 1) & kMask) {
      const Slot& s = slots_[i];
      if (s.n_ids == 0) return false;
      if (s.tag_len == tag_len && s.head == key.head &&
          (n <= 8 ||
           same_bytes(reinterpret_cast<const uint8_t*>(keys_.data()) + s.key_off, p + 8, n - 8))) {
        out->insert(out->end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.n_ids);
        return true;
      }
    }
  }

  void insert(const uint8_t* p, size_t n, const PieceKey& key, const int32_t* ids, size_t k) {
    if (slots_.empty()) slots_.resize(kMask + 1);
    if (count_ >= kMaxEntries) reset();
    size_t i = key.hash & kMask;
    while (slots_[i].n_ids != 0) i = (i + 1) & kMask;
    slots_[i] = Slot{key.head, key.tag_len(n), static_cast<uint32_t>(keys_.size()),
                     static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(k)};
    if (n > 8) keys_.append(reinterpret_cast<const char*>(p) + 8, n - 8);  // the rest of the key
    ids_.insert(ids_.end(), ids, ids + k);
    ++count_;
  }

  void reset() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t head = 0;  // the key's first 8 bytes
    uint32_t tag_len = 0;
    uint32_t key_off = 0;  // bytes 8.. of the key in keys_
    uint32_t ids_off = 0;
    uint32_t n_ids = 0;  // 0: empty slot
  };
  static constexpr size_t kMask = (1u << 17) - 1;
  static constexpr size_t kMaxEntries = (kMask + 1) / 2;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t count_ = 0;
};

// A few caches per thread, found by the model's serial number (never reused,
// unlike an address), so threads that alternate tokenizers keep their caches.
PieceCache& thread_cache(uint64_t serial) {
  struct Entry {
    uint64_t serial = 0;
    PieceCache cache;
  };
  thread_local Entry entries[4];
  thread_local unsigned next_victim = 0;
  for (Entry& e : entries)
    if (e.serial == serial) return e.cache;
  Entry& e = entries[next_victim++ % 4];
  e.serial = serial;
  e.cache.reset();
  return e.cache;
}

std::atomic<uint64_t> g_next_serial{1};

}  // namespace

class BpeModel {
 public:
  std::string name, source;
  SplitPattern pattern = SplitPattern::kGpt2;
  bool by_pairs = true;      // GPT-2 merges table; false: tiktoken's concatenation rule
  bool whole_tokens = true;  // a piece that is a token is that token, unmerged
  int32_t vocab_size = 0, eot_id = -1;
  uint64_t serial = 0;
  std::string arena;              // all token bytes
  std::vector<uint32_t> offsets;  // id -> [offsets[id], offsets[id + 1]) in arena
  int32_t byte_ids[256] = {};
  std::vector<std::pair<std::string, int32_t>> specials;

  std::string_view bytes(int32_t id) const {
    return std::string_view(arena).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }

  // Id of an ordinary token with these bytes, or -1.
  int32_t find_token(const uint8_t* p, size_t n, const PieceKey& key) const {
    const uint32_t tag_len = key.tag_len(n);
    for (uint64_t i = key.hash & token_mask_;; i = (i + 1) & token_mask_) {
      const TokenSlot& s = token_slots_[i];
      if (s.id < 0) return -1;
      if (s.tag_len == tag_len && s.head == key.head) {
        if (n <= 8) return s.id;  // same length, same bytes
        const uint32_t off = offsets[s.id];
        if (offsets[s.id + 1] - off == n &&
            same_bytes(reinterpret_cast<const uint8_t*>(arena.data()) + off + 8, p + 8, n - 8))
          return s.id;
      }
    }
  }
  int32_t find_token(const uint8_t* p, size_t n) const { return find_token(p, n, piece_key(p, n)); }

  // The merge of (a, b): its rank (kNoRank: none) and the merged id.
  uint32_t find_pair(int32_t a, int32_t b, int32_t* merged) const {
    const uint64_t key = pair_key(a, b);
    for (uint64_t i = pair_slot(key);; i = (i + 1) & pair_mask_) {
      const PairSlot& s = pair_slots_[i];
      if (s.key == key) {
        *merged = s.merged;
        return s.rank;
      }
      if (s.key == kEmptyKey) return kNoRank;
    }
  }

  void index_tokens(const std::vector<bool>& ordinary) {
    size_t count = 0;
    for (bool o : ordinary) count += o;
    token_slots_.assign(table_size_for(count), TokenSlot{});
    token_mask_ = token_slots_.size() - 1;
    for (int32_t id = 0; id < vocab_size; ++id) {
      if (!ordinary[id]) continue;
      const std::string_view b = bytes(id);
      const auto* p = reinterpret_cast<const uint8_t*>(b.data());
      const PieceKey key = piece_key(p, b.size());
      if (find_token(p, b.size(), key) >= 0) continue;  // duplicate bytes: the first id wins
      uint64_t i = key.hash & token_mask_;
      while (token_slots_[i].id >= 0) i = (i + 1) & token_mask_;
      token_slots_[i] = TokenSlot{key.head, key.tag_len(b.size()), id};
    }
  }

  struct Merge {
    int32_t left, right, merged;
    uint32_t rank;
  };
  void index_pairs(const std::vector<Merge>& merges) {
    pair_slots_.assign(table_size_for(merges.size()), PairSlot{});
    pair_mask_ = pair_slots_.size() - 1;
    pair_shift_ = 64 - std::countr_zero(pair_slots_.size());
    for (const Merge& m : merges) {
      const uint64_t key = pair_key(m.left, m.right);
      uint64_t i = pair_slot(key);
      while (pair_slots_[i].key != kEmptyKey && pair_slots_[i].key != key) i = (i + 1) & pair_mask_;
      if (pair_slots_[i].key == key) continue;  // a repeated pair keeps its lowest rank
      pair_slots_[i] = PairSlot{key, m.rank, m.merged};
    }
  }

 private:
  struct TokenSlot {
    uint64_t head = 0;  // the token's first 8 bytes
    uint32_t tag_len = 0;
    int32_t id = -1;  // -1: empty
  };
  static constexpr uint64_t kEmptyKey = ~0ull;
  struct PairSlot {
    uint64_t key = kEmptyKey;
    uint32_t rank = kNoRank;
    int32_t merged = -1;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  uint64_t pair_slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> pair_shift_; }

  std::vector<TokenSlot> token_slots_;
  uint64_t token_mask_ = 0;
  std::vector<PairSlot> pair_slots_;
  uint64_t pair_mask_ = 0;
  int pair_shift_ = 64;
};

std::shared_ptr<const BpeModel> build_bpe_model(BpeVocab vocab) {
  auto m = std::make_shared<BpeModel>();
  m->name = vocab.name;
  m->source = vocab.source;
  m->pattern = vocab.pattern;
  m->whole_tokens = vocab.whole_tokens;
  m->serial = g_next_serial.fetch_add(1);
  const std::string where = "tokenizer '" + vocab.name + "' (" + vocab.source + ")";

  // Specials may lie beyond the ordinary tokens; they decode to their text.
  int32_t max_id = static_cast<int32_t>(vocab.tokens.size()) - 1;
  for (const auto& [text, id] : vocab.specials) {
    if (id < 0) throw Error(where + ": negative id for special token " + text);
    max_id = std::max(max_id, id);
  }
  m->vocab_size = vocab.vocab_size ? vocab.vocab_size : max_id + 1;
  if (m->vocab_size <= max_id)
    throw Error(strf("%s: ids reach %d but the vocabulary size is %d", where.c_str(), max_id,
                     m->vocab_size));
  std::vector<std::string> tokens = std::move(vocab.tokens);
  tokens.resize(m->vocab_size);
  std::vector<bool> ordinary(m->vocab_size);
  for (int32_t id = 0; id < m->vocab_size; ++id) ordinary[id] = !tokens[id].empty();
  for (const auto& [text, id] : vocab.specials) {
    tokens[id] = text;
    ordinary[id] = false;
    if (text == "<|endoftext|>") m->eot_id = id;
  }
  m->specials = std::move(vocab.specials);
  m->offsets.reserve(tokens.size() + 1);
  for (const std::string& t : tokens) {
    m->offsets.push_back(static_cast<uint32_t>(m->arena.size()));
    m->arena += t;
  }
  m->offsets.push_back(static_cast<uint32_t>(m->arena.size()));
  m->index_tokens(ordinary);

  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    m->byte_ids[b] = m->find_token(&byte, 1);
    if (m->byte_ids[b] < 0) throw Error(strf("%s: no token for byte 0x%02x", where.c_str(), b));
  }

  // GPT-2: the listed merges, rank = position in the list. tiktoken needs no
  // table: a pair's rank is the id of its concatenation (see ConcatRank).
  m->by_pairs = !vocab.merges.empty();
  std::vector<BpeModel::Merge> merges;
  merges.reserve(vocab.merges.size());
  auto id_of = [&](const std::string& t) {
    const auto* p = reinterpret_cast<const uint8_t*>(t.data());
    return m->find_token(p, t.size());
  };
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const auto& [left, right] = vocab.merges[r];
    const int32_t a = id_of(left), b = id_of(right), ab = id_of(left + right);
    if (a < 0 || b < 0 || ab < 0)
      throw Error(strf("%s: merge %zu joins bytes that are not tokens", where.c_str(), r + 1));
    merges.push_back({a, b, ab, static_cast<uint32_t>(r)});
  }
  m->index_pairs(merges);
  return m;
}

namespace {

// Rank of merging the parts [begin, mid) and [mid, end) of piece p, whose ids
// are a and b; kNoRank when they do not merge.
struct PairRank {  // GPT-2: the merges table
  const BpeModel& m;
  uint32_t operator()(const uint8_t*, size_t, size_t, int32_t a, int32_t b, int32_t* merged) const {
    return m.find_pair(a, b, merged);
  }
};
struct ConcatRank {  // tiktoken: the rank (= id) of the concatenation, if a token
  const BpeModel& m;
  uint32_t operator()(const uint8_t* p, size_t begin, size_t end, int32_t, int32_t,
                      int32_t* merged) const {
    const int32_t id = m.find_token(p + begin, end - begin);
    *merged = id;
    return id < 0 ? kNoRank : static_cast<uint32_t>(id);
  }
};

// BPE of a piece of at most kShortPiece bytes, on stack arrays.
template <class Rank>
void merge_short(Rank rank, const BpeModel& m, const uint8_t* p, size_t n,
                 std::vector<int32_t>* out) {
  int32_t ids[kShortPiece];
  uint8_t start[kShortPiece + 1];  // part i is bytes [start[i], start[i + 1])
  int32_t merged[kShortPiece];
  uint32_t ranks[kShortPiece];  // ranks[i]: merging parts i and i + 1
  static_assert(kShortPiece <= 255, "start[] holds byte offsets in a uint8_t");
  for (size_t i = 0; i < n; ++i) ids[i] = m.byte_ids[p[i]], start[i] = static_cast<uint8_t>(i);
  start[n] = static_cast<uint8_t>(n);
  auto pair = [&](size_t i) {
    ranks[i] = rank(p, start[i], start[i + 2], ids[i], ids[i + 1], &merged[i]);
  };
  for (size_t i = 0; i + 1 < n; ++i) pair(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == kNoRank) break;
    ids[best] = merged[best];
    // Drop part best + 1 and the pair that started there.
    std::memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof(int32_t));
    std::memmove(start + best + 1, start + best + 2, n - best - 1);
    if (best + 3 < n) {  // pairs best + 2 .. n - 2 move down by one
      std::memmove(ranks + best + 1, ranks + best + 2, (n - best - 3) * sizeof(uint32_t));
      std::memmove(merged + best + 1, merged + best + 2, (n - best - 3) * sizeof(int32_t));
    }
    --n;
    if (best > 0) pair(best - 1);
    if (best + 1 < n) pair(best);
  }
  out->insert(out->end(), ids, ids + n);
}

// BPE of a long piece: a doubly linked list of parts (indexed by their first
// byte) and a min-heap of candidate merges ordered by (rank, position), which
// is "lowest rank, leftmost first"; entries made stale by a merge are skipped.
template <class Rank>
void merge_long(Rank rank, const BpeModel& m, const uint8_t* p, size_t n,
                std::vector<int32_t>* out) {
  struct Part {
    int32_t id, prev, next;  // prev/next: -1 at the ends; id -1: merged away
  };
  struct Cand {
    uint32_t rank;
    int32_t pos, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Part> parts;
  parts.resize(n);
  for (size_t i = 0; i < n; ++i)
    parts[i] = Part{m.byte_ids[p[i]], static_cast<int32_t>(i) - 1,
                    i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  auto end_of = [&](int32_t pos) { return parts[pos].next < 0 ? n : size_t(parts[pos].next); };
  auto rank_at = [&](int32_t pos, int32_t* merged) {
    const int32_t r = parts[pos].next;
    return rank(p, pos, end_of(r), parts[pos].id, parts[r].id, merged);
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || parts[pos].next < 0) return;
    int32_t merged = -1;
    const uint32_t r = rank_at(pos, &merged);
    if (r != kNoRank) heap.push(Cand{r, pos, parts[pos].next});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Part& left = parts[c.pos];
    if (left.id < 0 || left.next != c.right) continue;  // merged away, or its right part changed
    int32_t merged = -1;
    if (rank_at(c.pos, &merged) != c.rank) continue;  // the right part grew since
    Part& right = parts[c.right];
    left.id = merged;
    left.next = right.next;
    if (right.next >= 0) parts[right.next].prev = c.pos;
    right.id = -1;
    push(left.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = parts[i].next) out->push_back(parts[i].id);
  if (parts.capacity() > (1u << 20)) std::vector<Part>().swap(parts);  // keep no huge buffer
}

template <class Rank>
void merge_piece(Rank rank, const BpeModel& m, const uint8_t* p, size_t n,
                 std::vector<int32_t>* out) {
  if (n <= kShortPiece)
    merge_short(rank, m, p, n, out);
  else
    merge_long(rank, m, p, n, out);
}

template <class Rank>
inline void encode_piece(Rank rank, const BpeModel& m, PieceCache& cache, const uint8_t* p,
                         size_t n, std::vector<int32_t>* out) {
  if (n == 1) {
    out->push_back(m.byte_ids[p[0]]);
    return;
  }
  const PieceKey key = piece_key(p, n);
  if (m.whole_tokens) {
    const int32_t id = m.find_token(p, n, key);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  if (n > kMaxCachedPiece) return merge_piece(rank, m, p, n, out);
  if (cache.find(p, n, key, out)) return;
  const size_t before = out->size();
  merge_short(rank, m, p, n, out);
  cache.insert(p, n, key, out->data() + before, out->size() - before);
}

template <size_t (*Next)(const uint8_t*, size_t, size_t), class Rank>
void encode_text(Rank rank, const BpeModel& m, const uint8_t* s, size_t n,
                 std::vector<int32_t>* out) {
  PieceCache& cache = thread_cache(m.serial);
  for (size_t pos = 0; pos < n;) {
    const size_t end = Next(s, n, pos);
    encode_piece(rank, m, cache, s + pos, end - pos, out);
    pos = end;
  }
}

template <class Rank>
void encode_with(Rank rank, const BpeModel& m, const uint8_t* s, size_t n,
                 std::vector<int32_t>* out) {
  switch (m.pattern) {
    case SplitPattern::kGpt2:
      return encode_text<next_piece_gpt2>(rank, m, s, n, out);
    case SplitPattern::kCl100k:
      return encode_text<next_piece_cl100k>(rank, m, s, n, out);
    case SplitPattern::kO200k:
      return encode_text<next_piece_o200k>(rank, m, s, n, out);
    case SplitPattern::kQwen2:
      return encode_text<next_piece_qwen2>(rank, m, s, n, out);
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::shared_ptr<const BpeModel> model) : model_(std::move(model)) {}
BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>* out) const {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const BpeModel& m = *model_;
  if (m.by_pairs)
    encode_with(PairRank{m}, m, s, text.size(), out);
  else
    encode_with(ConcatRank{m}, m, s, text.size(), out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);  // ~3-4 bytes per token on English text and code
  encode_append(text, &ids);
  return ids;
}

std::vector<int32_t> BpeTokenizer::encode_with_special(
    std::string_view text, const std::vector<std::string>& allowed_special) const {
  std::vector<std::pair<std::string_view, int32_t>> allowed;
  for (const std::string& s : allowed_special) {
    const int32_t id = special_id(s);
    if (id < 0) throw Error("tokenizer '" + model_->name + "' has no special token '" + s + "'");
    allowed.emplace_back(s, id);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  while (!text.empty()) {
    // The earliest allowed special token; the longest one on a tie.
    size_t at = std::string_view::npos, len = 0;
    int32_t id = -1;
    for (const auto& [s, sid] : allowed) {
      const size_t k = text.find(s);
      if (k < at || (k == at && k != std::string_view::npos && s.size() > len))
        at = k, len = s.size(), id = sid;
    }
    encode_append(text.substr(0, at), &ids);
    if (at == std::string_view::npos) break;
    ids.push_back(id);
    text.remove_prefix(at + len);
  }
  return ids;
}

std::string BpeTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string out;
  out.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) out += token_bytes(ids[i]);
  return out;
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= model_->vocab_size)
    throw Error(strf("token id %d is out of range for tokenizer '%s' (vocabulary size %d)", id,
                     model_->name.c_str(), model_->vocab_size));
  return model_->bytes(id);
}

int32_t BpeTokenizer::special_id(std::string_view text) const {
  for (const auto& [s, id] : model_->specials)
    if (s == text) return id;
  return -1;
}

std::vector<int32_t> BpeTokenizer::merge_piece_uncached(std::string_view piece) const {
  std::vector<int32_t> ids;
  const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
  if (model_->by_pairs)
    merge_piece(PairRank{*model_}, *model_, p, piece.size(), &ids);
  else
    merge_piece(ConcatRank{*model_}, *model_, p, piece.size(), &ids);
  return ids;
}

int32_t BpeTokenizer::vocab_size() const { return model_->vocab_size; }
int32_t BpeTokenizer::eot_id() const { return model_->eot_id; }
std::string BpeTokenizer::name() const { return model_->name; }

}  // namespace meshloom::tokenizer
