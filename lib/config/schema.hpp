// The config schema machinery: one description of every key, three uses.
//
// Each config struct lists its keys once, in a template member
//   template <class V> void visit(V& v) { v.field("seq_len", seq_len, "doc", at_least(1)); }
// and three visitors walk that list: Reader (YAML -> struct, with typed errors
// that name file:line:column and the key path), Writer (struct -> YAML, the
// effective config) and Documenter (the reference table in docs/config.md). So the
// accepted keys, their defaults and their documentation cannot drift apart.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::config {

// A user error in a config: the message already names the place and the key.
struct ConfigError : Error {
  using Error::Error;
};

// Constraints on one key.
struct Rule {
  bool required = false;
  std::optional<double> min, max;
  std::vector<std::string> one_of;
  bool min_exclusive = false;
};
inline Rule required() { return Rule{true, {}, {}, {}}; }
inline Rule at_least(double lo) { return Rule{false, lo, {}, {}}; }
inline Rule above(double lo) { return Rule{false, lo, {}, {}, true}; }
inline Rule in_range(double lo, double hi) { return Rule{false, lo, hi, {}}; }
inline Rule one_of(std::vector<std::string> names) { return Rule{false, {}, {}, std::move(names)}; }

// Where keys came from: the file, --set overrides, and the mark of every key read.
class Origin {
 public:
  explicit Origin(std::string file) : file_(std::move(file)) {}
  void add_override(const std::string& path, const std::string& text) { overrides_[path] = text; }
  void record(const std::string& path, const YAML::Mark& mark) { marks_[path] = mark; }
  // "configs/x.yaml:3:5" or "--set a.b=c" for the key path (or its nearest recorded parent).
  std::string where(const std::string& path) const;
  std::string where(const std::string& path, const YAML::Mark& mark) const;
  [[noreturn]] void error(const std::string& path, const std::string& what) const;
  [[noreturn]] void error(const std::string& path, const YAML::Mark& mark,
                          const std::string& what) const;
  const std::string& file() const { return file_; }
  // Whether the key's value was written in the file (not --set, not a default).
  bool written_in_file(const std::string& path) const;

 private:
  const std::string* override_for(const std::string& path) const;
  std::string file_;
  std::map<std::string, std::string> overrides_;
  std::map<std::string, YAML::Mark> marks_;
};

// Put ML_CONFIG_SECTION in a struct with a visit() to make it a section.
#define ML_CONFIG_SECTION using is_config_section = void

template <class T, class = void>
struct has_section_tag : std::false_type {};
template <class T>
struct has_section_tag<T, std::void_t<typename T::is_config_section>> : std::true_type {};

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

using WeightMap = std::map<std::string, double>;

// A config choice is an enum, compared as such everywhere: specialize
// EnumNames<E> with the names of E(0), E(1), ... in order, and the visitors
// read, write, compare and document it by name.
template <class E>
struct EnumNames;
template <class E>
const char* enum_name(E value) {
  const auto& names = EnumNames<E>::names;
  const size_t i = size_t(value);
  return i < names.size() ? names[i] : "?";
}
template <class E>
std::vector<std::string> enum_choices() {
  return std::vector<std::string>(EnumNames<E>::names.begin(), EnumNames<E>::names.end());
}
template <class E>
Rule with_choices(Rule rule) {
  rule.one_of = enum_choices<E>();
  return rule;
}
std::string describe_rule(const Rule& rule);
std::string nearest_choice(const std::string& word, const std::vector<std::string>& choices);
// The choice named `name` (a command-line option's, say); else a ConfigError
// that names `what` and the choices.
template <class E>
E choice_from_name(const std::string& name, const std::string& what) {
  const auto choices = enum_choices<E>();
  for (size_t i = 0; i < choices.size(); ++i)
    if (choices[i] == name) return static_cast<E>(i);
  std::string msg = what + " is '" + name + "', " + describe_rule(with_choices<E>({}));
  const std::string near = nearest_choice(name, choices);
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  throw ConfigError(msg);
}

std::string scalar_text(const YAML::Node& node);
// The text of a mapping key under `parent`; a ConfigError unless it is a plain name.
std::string key_name(const YAML::Node& key, const std::string& parent, const Origin& origin);

// --- reading ---------------------------------------------------------------
class Reader {
 public:
  Reader(const YAML::Node& node, std::string path, Origin* origin)
      : node_(node), path_(std::move(path)), origin_(origin) {}

  template <class T>
  void field(const char* key, T& value, const char* /*doc*/, const Rule& rule = {}) {
    names_.push_back(key);
    const std::string path = path_.empty() ? key : path_ + "." + key;
    const YAML::Node child = node_[key];
    if (!child) {
      if (rule.required) origin_->error(path, node_.Mark(), "missing required key '" + path + "'");
      return;
    }
    if (child.IsNull()) {
      // An empty section or list says "nothing here"; an empty value would
      // silently mean the default.
      if constexpr (has_section_tag<T>::value || is_vector<T>::value ||
                    std::is_same_v<T, WeightMap>)
        return;
      origin_->error(path, key_mark(key),
                     "'" + path + "' has no value (remove the key to use the default)");
    }
    origin_->record(path, child.Mark());
    read(child, path, value, rule);
  }
  // Rejects keys that no field() asked for, suggesting the nearest valid one.
  void finish() const;

 private:
  template <class T>
  void read(const YAML::Node& n, const std::string& path, T& value, const Rule& rule);
  void read_number(const YAML::Node& n, const std::string& path, double* out, bool integer,
                   const Rule& rule);
  YAML::Mark key_mark(const char* key) const;

  YAML::Node node_;
  std::string path_;
  Origin* origin_;
  std::vector<std::string> names_;
};

template <class T>
void Reader::read(const YAML::Node& n, const std::string& path, T& value, const Rule& rule) {
  if constexpr (has_section_tag<T>::value) {
    if (!n.IsMap()) origin_->error(path, n.Mark(), "'" + path + "' must be a mapping of keys");
    Reader sub(n, path, origin_);
    value.visit(sub);
    sub.finish();
  } else if constexpr (is_vector<T>::value) {
    if (!n.IsSequence()) origin_->error(path, n.Mark(), "'" + path + "' must be a list");
    value.clear();
    value.resize(n.size());
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      origin_->record(item, n[i].Mark());
      read(n[i], item, value[i], Rule{});
    }
  } else if constexpr (std::is_same_v<T, WeightMap>) {
    if (!n.IsMap()) origin_->error(path, n.Mark(), "'" + path + "' must map names to numbers");
    value.clear();
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string name = key_name(it->first, path, *origin_);
      const std::string item = path + "." + name;
      origin_->record(item, it->second.Mark());
      double w = 0;
      read_number(it->second, item, &w, false, rule);
      value[name] = w;
    }
  } else if constexpr (std::is_enum_v<T>) {
    std::string name;
    read(n, path, name, with_choices<T>(rule));
    const auto choices = enum_choices<T>();
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i] == name) value = static_cast<T>(i);
  } else if constexpr (std::is_same_v<T, bool>) {
    bool b = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b))
      origin_->error(path, n.Mark(),
                     "'" + path + "' must be true or false, not '" + scalar_text(n) + "'");
    value = b;
  } else if constexpr (std::is_integral_v<T>) {
    double d = 0;
    read_number(n, path, &d, true, rule);
    // From the text again: a double rounds above 2^53 (INT64_MAX to 2^63, which overflows).
    value = static_cast<T>(std::strtoll(n.Scalar().c_str(), nullptr, 10));
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    read_number(n, path, &d, false, rule);
    value = static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!n.IsScalar()) origin_->error(path, n.Mark(), "'" + path + "' must be a string");
    value = n.Scalar();
    if (!rule.one_of.empty()) {
      bool ok = false;
      for (const auto& c : rule.one_of) ok = ok || c == value;
      if (!ok) {
        std::string msg = "'" + path + "' is '" + value + "', " + describe_rule(rule);
        std::string near = nearest_choice(value, rule.one_of);
        if (!near.empty()) msg += "; did you mean '" + near + "'?";
        origin_->error(path, n.Mark(), msg);
      }
    }
  } else {
    static_assert(sizeof(T) == 0, "unsupported config field type");
  }
}

// --- writing ---------------------------------------------------------------
class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}
  template <class T>
  void field(const char* key, const T& value, const char* /*doc*/, const Rule& = {}) {
    out_ << YAML::Key << key << YAML::Value;
    write(value);
  }

 private:
  template <class T>
  void write(const T& value) {
    if constexpr (has_section_tag<T>::value) {
      out_ << YAML::BeginMap;
      const_cast<T&>(value).visit(*this);
      out_ << YAML::EndMap;
    } else if constexpr (is_vector<T>::value) {
      out_ << YAML::BeginSeq;
      for (const auto& item : value) write(item);
      out_ << YAML::EndSeq;
    } else if constexpr (std::is_same_v<T, WeightMap>) {
      out_ << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, v] : value) out_ << YAML::Key << k << YAML::Value << shortest_text(v);
      out_ << YAML::EndMap;
    } else if constexpr (std::is_floating_point_v<T>) {
      out_ << shortest_text(value);  // yaml-cpp writes 0.0060000000000000001
    } else if constexpr (std::is_enum_v<T>) {
      out_ << enum_name(value);
    } else {
      out_ << value;
    }
  }
  YAML::Emitter& out_;
};

// --- documenting -----------------------------------------------------------
struct KeyDoc {
  std::string path, type, default_value, allowed, doc;
};

class Documenter {
 public:
  explicit Documenter(std::string path, std::vector<KeyDoc>* rows)
      : path_(std::move(path)), rows_(rows) {}
  template <class T>
  void field(const char* key, const T& value, const char* doc, const Rule& rule = {}) {
    const std::string path = path_.empty() ? key : path_ + "." + key;
    describe(path, value, doc, rule);
  }

 private:
  template <class T>
  void describe(const std::string& path, const T& value, const char* doc, const Rule& rule);
  std::string path_;
  std::vector<KeyDoc>* rows_;
};

template <class T>
void Documenter::describe(const std::string& path, const T& value, const char* doc,
                          const Rule& rule) {
  const std::string allowed = describe_rule(rule);
  if constexpr (has_section_tag<T>::value) {
    rows_->push_back({path, "section", "", "", doc});
    Documenter sub(path, rows_);
    const_cast<T&>(value).visit(sub);
  } else if constexpr (is_vector<T>::value) {
    using Item = typename T::value_type;
    if constexpr (has_section_tag<Item>::value) {
      rows_->push_back({path, "list", "[]", allowed, doc});
      Item item{};
      Documenter sub(path + "[]", rows_);
      item.visit(sub);
    } else {
      rows_->push_back({path, "list", "[]", allowed, doc});
    }
  } else if constexpr (std::is_same_v<T, WeightMap>) {
    rows_->push_back({path, "map name: number", "{}", allowed, doc});
  } else if constexpr (std::is_enum_v<T>) {
    rows_->push_back({path, "string", enum_name(value), describe_rule(with_choices<T>(rule)), doc});
  } else if constexpr (std::is_same_v<T, bool>) {
    rows_->push_back({path, "bool", value ? "true" : "false", allowed, doc});
  } else if constexpr (std::is_integral_v<T>) {
    rows_->push_back({path, "int", std::to_string(value), allowed, doc});
  } else if constexpr (std::is_floating_point_v<T>) {
    rows_->push_back({path, "float", shortest_text(value), allowed, doc});
  } else {
    rows_->push_back({path, "string", value.empty() ? "\"\"" : value, allowed, doc});
  }
}

}  // namespace meshloom::config
