#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "base/strings.hpp"
#include "base/utf8.hpp"
#include "config/config.hpp"

namespace meshloom::config {

void validate(const Config& config, const Origin& origin);  // validate.cpp
void resolve_relative_paths(Config* c, const Origin& origin,
                            const std::string& config_file);  // paths.cpp

// --- Origin ------------------------------------------------------------------

const std::string* Origin::override_for(const std::string& path) const {
  // An override of "a.b" covers "a.b" and everything under it.
  for (const auto& [key, text] : overrides_) {
    if (path == key || starts_with(path, key + ".") || starts_with(path, key + "[")) return &text;
  }
  return nullptr;
}

bool Origin::written_in_file(const std::string& path) const {
  if (override_for(path)) return false;
  auto it = marks_.find(path);
  return it != marks_.end() && !it->second.is_null();
}

std::string Origin::where(const std::string& path, const YAML::Mark& mark) const {
  if (const std::string* text = override_for(path)) return "--set " + *text;
  if (mark.is_null()) {
    // No file wrote this node: an override made it on the way to a deeper key.
    for (const auto& [key, text] : overrides_)
      if (starts_with(key, path + ".") || starts_with(key, path + "[")) return "--set " + text;
    return file_;
  }
  return strf("%s:%d:%d", file_.c_str(), mark.line + 1, mark.column + 1);
}

std::string Origin::where(const std::string& path) const {
  if (const std::string* text = override_for(path)) return "--set " + *text;
  // The key itself, else its nearest recorded parent.
  std::string p = path;
  while (true) {
    auto it = marks_.find(p);
    if (it != marks_.end()) return where(p, it->second);
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) return file_;
    p = p.substr(0, cut);
  }
}

void Origin::error(const std::string& path, const std::string& what) const {
  throw ConfigError(where(path) + ": " + what);
}
void Origin::error(const std::string& path, const YAML::Mark& mark, const std::string& what) const {
  throw ConfigError(where(path, mark) + ": " + what);
}

// --- helpers -------------------------------------------------------------------

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

std::string key_name(const YAML::Node& key, const std::string& parent, const Origin& origin) {
  if (key.IsScalar()) return key.Scalar();
  const std::string what = key.IsNull() ? "empty" : scalar_text(key);
  origin.error(parent, key.Mark(),
               (parent.empty() ? std::string("a top-level key") : "a key in '" + parent + "'") +
                   " is " + what + "; keys must be plain names");
}

std::string nearest_choice(const std::string& word, const std::vector<std::string>& choices) {
  return nearest(word, choices);
}

static std::string number_text(double x) {
  // Whole numbers in full: "1.04858e+06" for 1 << 20 would misstate the bound.
  if (std::fabs(x) < 1e18 && x == std::floor(x)) return strf("%.0f", x);
  std::ostringstream os;
  os << x;
  return os.str();
}

std::string describe_rule(const Rule& rule) {
  if (!rule.one_of.empty()) return "one of: " + join(rule.one_of, ", ");
  const char* lo = rule.min_exclusive ? "> " : ">= ";
  if (rule.min && rule.max)
    return "from " + number_text(*rule.min) + " to " + number_text(*rule.max);
  if (rule.min) return lo + number_text(*rule.min);
  if (rule.max) return "<= " + number_text(*rule.max);
  return "";
}

void Reader::read_number(const YAML::Node& n, const std::string& path, double* out, bool integer,
                         const Rule& rule) {
  const char* what = integer ? "an integer" : "a number";
  if (!n.IsScalar())
    origin_->error(path, n.Mark(), "'" + path + "' must be " + what + ", not " + scalar_text(n));
  const std::string& s = n.Scalar();
  char* end = nullptr;
  errno = 0;
  double value = 0;
  if (integer) {
    long long v = std::strtoll(s.c_str(), &end, 10);
    value = static_cast<double>(v);
  } else {
    value = std::strtod(s.c_str(), &end);
  }
  if (s.empty() || errno == ERANGE || end == nullptr || *end != '\0' || !std::isfinite(value))
    origin_->error(path, n.Mark(), "'" + path + "' must be " + what + ", not '" + s + "'");
  bool below = rule.min && (rule.min_exclusive ? value <= *rule.min : value < *rule.min);
  bool over = rule.max && value > *rule.max;
  if (below || over)
    origin_->error(path, n.Mark(),
                   "'" + path + "' is " + s + ", out of range (" + describe_rule(rule) + ")");
  *out = value;
}

YAML::Mark Reader::key_mark(const char* key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->first.Mark();
  return YAML::Mark::null_mark();
}

void Reader::finish() const {
  if (!node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = key_name(it->first, path_, *origin_);
    bool known = false;
    for (const auto& name : names_) known = known || name == key;
    if (known) continue;
    const std::string path = path_.empty() ? key : path_ + "." + key;
    std::string msg = "unknown key '" + path + "'";
    std::string near = nearest(key, names_);
    if (!near.empty())
      msg += "; did you mean '" + (path_.empty() ? near : path_ + "." + near) + "'?";
    else
      msg += "; valid keys here: " + join(names_, ", ");
    origin_->error(path, it->first.Mark(), msg);
  }
}

// yaml-cpp keeps both copies of a duplicate key and lookups see only the first,
// so every mapping is checked for keys written twice (and for non-name keys).
static void check_keys(const YAML::Node& n, const std::string& path, const Origin& origin) {
  if (n.IsSequence())
    for (size_t i = 0; i < n.size(); ++i)
      check_keys(n[i], path + "[" + std::to_string(i) + "]", origin);
  if (!n.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = key_name(it->first, path, origin);
    const std::string sub = path.empty() ? key : path + "." + key;
    auto [first, fresh] = seen.emplace(key, it->first.Mark());
    if (!fresh)
      origin.error(
          sub, it->first.Mark(),
          "duplicate key '" + sub + "' (first at " + origin.where(sub, first->second) + ")");
    check_keys(it->second, sub, origin);
  }
}

// --- overrides -----------------------------------------------------------------

// "a.b[0].c" -> "a.b.0.c": messages print list items as [i], so users type them.
static std::string dotted_path(const std::string& path, const std::string& text) {
  std::string out;
  bool open = false;  // inside [ ]
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '[' || path[i] == ']') {
      if (open == (path[i] == '['))
        throw ConfigError("--set " + text + ": unbalanced brackets in '" + path + "'");
      open = !open;
    }
    if (path[i] == '[') {
      out += '.';
    } else if (path[i] == ']') {
      // The '.' or '[' that follows is the separator.
      if (i + 1 < path.size() && path[i + 1] != '.' && path[i + 1] != '[')
        throw ConfigError("--set " + text + ": expected '.' or '[' after ']' in '" + path + "'");
    } else {
      out += path[i];
    }
  }
  if (open) throw ConfigError("--set " + text + ": unbalanced brackets in '" + path + "'");
  return out;
}

// Sets root[a][b]... = value for "a.b...=value"; numeric parts index lists.
static void apply_override(YAML::Node root, const std::string& text, Origin* origin) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + text + ": expected key.path=value");
  const std::string path = text.substr(0, eq);
  const std::vector<std::string> parts = split(dotted_path(path, text), '.');
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + text + ": value is not valid YAML: " + e.msg);
  }
  std::string norm;  // path as the reader names it: a.b[0].c
  YAML::Node node = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) throw ConfigError("--set " + text + ": empty key in '" + path + "'");
    const bool last = i + 1 == parts.size();
    if (node.IsSequence()) {
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || idx < 0 || static_cast<size_t>(idx) >= node.size())
        throw ConfigError("--set " + text + ": '" + norm + "' is a list of " +
                          std::to_string(node.size()) + "; '" + part + "' is not an index in it");
      norm += "[" + part + "]";
      if (last) {
        node[idx] = value;
      } else {
        YAML::Node next = node[idx];
        node.reset(next);
      }
      continue;
    }
    if (!node.IsMap() && !node.IsNull())
      throw ConfigError("--set " + text + ": '" + norm + "' is not a section");
    norm += (norm.empty() ? "" : ".") + part;
    if (last) {
      node[part] = value;
    } else {
      // "faults.inject[0].kind" on a list the file does not write: there is no
      // item 0 to change (an index never appends).
      const std::string& next_part = parts[i + 1];
      auto is_list = [&] {
        for (const KeyDoc& row : reference_rows())
          if (row.path == norm) return row.type == "list";
        return false;
      };
      if (!node[part] && !next_part.empty() &&
          next_part.find_first_not_of("0123456789") == std::string::npos && is_list())
        throw ConfigError("--set " + text + ": the config file does not write '" + norm +
                          "', so it has no item " + next_part +
                          " to change; set the whole list: --set '" + norm + "=[...]'");
      if (!node[part]) node[part] = YAML::Node(YAML::NodeType::Map);
      YAML::Node next = node[part];
      node.reset(next);
    }
  }
  origin->add_override(norm, text);
  // "--set run.steps=" would otherwise silently mean the default, "--set run=" reset a section.
  if (value.IsNull()) throw ConfigError("--set " + text + ": '" + norm + "' has no value");
  check_keys(value, norm, *origin);
}

// --- loading -------------------------------------------------------------------

namespace {

// With `file_paths`, `name` is the config file, and relative paths resolve
// against its folder (paths.cpp).
Config parse(const std::string& text, const std::string& name,
             const std::vector<std::string>& overrides, bool file_paths) {
  Origin origin(name);
  const size_t valid = valid_utf8_prefix(text);
  if (valid < text.size()) {
    const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + long(valid), '\n'));
    throw ConfigError(
        strf("%s:%zu: the config is not valid UTF-8 (byte %zu)", name.c_str(), line, valid + 1));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(strf("%s:%d:%d: YAML syntax error: %s", name.c_str(), e.mark.line + 1,
                           e.mark.column + 1, e.msg.c_str()));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError(name + ": the config must be a mapping of sections");
  // The checks above should leave no yaml-cpp exception to escape; should one
  // still, it becomes a config error with the place, not a terminate.
  try {
    check_keys(root, "", origin);
    for (const auto& o : overrides) apply_override(root, o, &origin);
    Config config;
    Reader reader(root, "", &origin);
    config.visit(reader);
    reader.finish();
    const YAML::Node& model = std::as_const(root)["model"];
    if (model.IsMap())
      for (const auto& key : model) config.model.written.push_back(key.first.as<std::string>());
    validate(config, origin);
    if (file_paths) resolve_relative_paths(&config, origin, name);
    return config;
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw ConfigError(name + ": " + e.msg);
    throw ConfigError(
        strf("%s:%d:%d: %s", name.c_str(), e.mark.line + 1, e.mark.column + 1, e.msg.c_str()));
  }
}

}  // namespace

Config parse_config(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides) {
  return parse(text, name, overrides, /*file_paths=*/false);
}

ModelConfig parse_model_section(const std::string& text, const std::string& name) {
  Origin origin(name);
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || !root["model"] || !root["model"].IsMap())
      throw ConfigError(name + ": no model section");
    ModelConfig model;
    Reader reader(root["model"], "model", &origin);
    model.visit(reader);
    reader.finish();
    return model;
  } catch (const YAML::Exception& e) {
    throw ConfigError(
        strf("%s:%d:%d: %s", name.c_str(), e.mark.line + 1, e.mark.column + 1, e.msg.c_str()));
  }
}

Config load_config(const std::string& file, const std::vector<std::string>& overrides) {
  // An ifstream opens a directory and reads nothing, which would read as an empty config.
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError("config '" + file + "' is a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("cannot read config '" + file + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError("cannot read config '" + file + "': " + std::strerror(errno));
  return parse(text.str(), file, overrides, /*file_paths=*/true);
}

std::string to_yaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  Writer writer(out);
  const_cast<Config&>(config).visit(writer);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<KeyDoc> reference_rows() {
  std::vector<KeyDoc> rows;
  Config defaults;
  Documenter doc("", &rows);
  defaults.visit(doc);
  return rows;
}

std::string reference_markdown() {
  std::string out =
      "| key | type | default | allowed | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& r : reference_rows()) {
    if (r.type == "section") {
      out += "| **`" + r.path + "`** | section | | | " + r.doc + " |\n";
      continue;
    }
    std::string def = r.default_value.empty() ? "" : "`" + r.default_value + "`";
    out +=
        "| `" + r.path + "` | " + r.type + " | " + def + " | " + r.allowed + " | " + r.doc + " |\n";
  }
  return out;
}

}  // namespace meshloom::config
