#include "config/diff.hpp"

#include <utility>

#include "base/strings.hpp"
#include "config/schema.hpp"

namespace meshloom::config {
namespace {

// Walks the schema like Writer does, writing "path -> value" pairs.
class Flattener {
 public:
  explicit Flattener(std::vector<std::pair<std::string, std::string>>* out) : out_(out) {}
  template <class T>
  void field(const char* key, const T& value, const char* /*doc*/, const Rule& = {}) {
    const std::string saved = prefix_;
    if (!prefix_.empty()) prefix_.push_back('.');
    prefix_.append(key);
    flatten(value);
    prefix_ = saved;
  }

 private:
  template <class T>
  void flatten(const T& value) {
    if constexpr (has_section_tag<T>::value) {
      const_cast<T&>(value).visit(*this);
    } else if constexpr (is_vector<T>::value) {
      const std::string saved = prefix_;
      out_->push_back({strf("%s.size", saved.c_str()), std::to_string(value.size())});
      for (size_t i = 0; i < value.size(); ++i) {
        prefix_ = strf("%s[%zu]", saved.c_str(), i);
        flatten(value[i]);
      }
      prefix_ = saved;
    } else if constexpr (std::is_same_v<T, WeightMap>) {
      YAML::Emitter e;
      e << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, v] : value) e << YAML::Key << k << YAML::Value << shortest_text(v);
      e << YAML::EndMap;
      out_->push_back({prefix_, e.c_str()});
    } else if constexpr (std::is_floating_point_v<T>) {
      out_->push_back({prefix_, shortest_text(value)});
    } else if constexpr (std::is_enum_v<T>) {
      out_->push_back({prefix_, enum_name(value)});
    } else {
      YAML::Emitter e;
      e << value;
      out_->push_back({prefix_, e.c_str()});
    }
  }
  std::vector<std::pair<std::string, std::string>>* out_;
  std::string prefix_;
};

std::vector<std::pair<std::string, std::string>> flatten(const Config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  Flattener f(&out);
  const_cast<Config&>(c).visit(f);
  return out;
}

}  // namespace

std::vector<KeyChange> changed_keys(const Config& before, const Config& after) {
  const auto a = flatten(before), b = flatten(after);
  std::map<std::string, std::string> in_b(b.begin(), b.end());
  std::map<std::string, std::string> in_a(a.begin(), a.end());
  std::vector<KeyChange> out;
  for (const auto& [key, value] : a) {
    auto it = in_b.find(key);
    const std::string other = it == in_b.end() ? "(none)" : it->second;
    if (other != value) out.push_back({key, value, other});
  }
  for (const auto& [key, value] : b)  // keys only `after` has (a longer list)
    if (!in_a.count(key)) out.push_back({key, "(none)", value});
  return out;
}

}  // namespace meshloom::config
