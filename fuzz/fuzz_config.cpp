// The config reader with --set overrides (lib/config): the input is the YAML
// text, then optionally a NUL and one override "a.b=value" per line.
//
// Checks: bad input is one ConfigError naming the config or the --set; a
// config that reads is printed (what run.dir/config.yaml holds, and what a
// checkpoint's /meta/config holds for resume) and must read back to the same
// values.
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/diff.hpp"
#include "fuzz/harness.hpp"

using namespace meshloom;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const auto [yaml, rest] = fuzz::split_at_nul(fuzz::bytes(data, size));
  std::vector<std::string> overrides;
  for (size_t pos = 0; pos < rest.size();) {
    size_t eol = rest.find('\n', pos);
    if (eol == std::string_view::npos) eol = rest.size();
    if (eol > pos) overrides.emplace_back(rest.substr(pos, eol - pos));
    pos = eol + 1;
  }
  config::Config c;
  try {
    c = config::parse_config(std::string(yaml), "fuzz.yaml", overrides);
  } catch (const Error& e) {
    fuzz::expect_names(e, {"fuzz.yaml", "--set"});
    return 0;
  }
  const std::string text = config::to_yaml(c);
  config::Config again;
  try {
    again = config::parse_config(text, "effective.yaml");
  } catch (const Error& e) {
    fuzz::finding(std::string("the effective config does not read back: ") + e.what() +
                  "\n--- effective config:\n" + text);
  }
  const auto changes = config::changed_keys(c, again);
  if (!changes.empty())
    fuzz::finding("the effective config reads back different: " + changes[0].key + " was " +
                  changes[0].before + ", reads back " + changes[0].after);
  return 0;
}
