// Implements util/Yaml.h: strict typed access to a yaml-cpp mapping with
// file:line:key errors and detection of unknown and duplicate keys.
#include "util/Yaml.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/ranges.h>

namespace gradzip {
namespace {

std::string joinChoices(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

bool parseInt(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  size_t pos = 0;
  try {
    out = std::stoll(s, &pos, 0);
  } catch (...) {
    return false;
  }
  return pos == s.size();
}

bool parseDouble(const std::string& s, double& out) {
  if (s.empty()) return false;
  // YAML spellings of the special values, which std::stod does not know.
  if (s == ".inf" || s == ".Inf" || s == "+.inf") { out = INFINITY; return true; }
  if (s == "-.inf" || s == "-.Inf") { out = -INFINITY; return true; }
  size_t pos = 0;
  try {
    out = std::stod(s, &pos);
  } catch (...) {
    return false;
  }
  return pos == s.size();
}

std::string intRange(int64_t lo, int64_t hi) {
  if (lo == INT64_MIN && hi == INT64_MAX) return "";
  if (hi == INT64_MAX) return fmt::format(">= {}", lo);
  if (lo == INT64_MIN) return fmt::format("<= {}", hi);
  return fmt::format("[{}, {}]", lo, hi);
}

std::string doubleRange(double lo, double hi) {
  if (lo <= -1e308 && hi >= 1e308) return "";
  if (hi >= 1e308) return fmt::format(">= {}", lo);
  if (lo <= -1e308) return fmt::format("<= {}", hi);
  return fmt::format("[{}, {}]", lo, hi);
}

template <class T>
std::string listText(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

}  // namespace

YamlReader YamlReader::loadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot open config file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return loadString(ss.str(), path);
}

YamlReader YamlReader::loadString(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}:{}: malformed YAML: {}", origin, e.mark.line + 1, e.msg));
  }
  if (!root.IsNull() && !root.IsMap())
    throw ConfigError(fmt::format("{}:{}: expected a mapping of keys at the top level", origin,
                                  root.Mark().line + 1));
  rejectDuplicateKeys(root, origin);
  return YamlReader(root, origin, "");
}

void rejectDuplicateKeys(const YAML::Node& node, const std::string& origin, const std::string& path) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) rejectDuplicateKeys(node[i], origin, fmt::format("{}[{}]", path, i));
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> firstLine;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
    const std::string keyPath = path.empty() ? key : path + "." + key;
    const int line = it->first.Mark().line + 1;
    if (!key.empty()) {
      auto [at, fresh] = firstLine.emplace(key, line);
      if (!fresh)
        throw ConfigError(fmt::format("{}:{}: {}: duplicate key (first given on line {}); keep one of them", origin,
                                      line, keyPath, at->second));
    }
    rejectDuplicateKeys(it->second, origin, keyPath);
  }
}

YamlReader::YamlReader(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)),
      used_(std::make_shared<std::set<std::string>>()) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
    fail("", fmt::format("expected a mapping, got {}", describe(node_)));
}

int YamlReader::line() const {
  if (!node_.IsDefined() || node_.IsNull()) return 0;
  return node_.Mark().line + 1;
}

std::string YamlReader::keyPath(const std::string& key) const {
  if (key.empty()) return path_.empty() ? std::string("<root>") : path_;
  return path_.empty() ? key : path_ + "." + key;
}

void YamlReader::setOverrides(std::map<std::string, std::string> overrides) {
  overrides_ = std::make_shared<const std::map<std::string, std::string>>(std::move(overrides));
}

void YamlReader::recordInto(std::shared_ptr<std::vector<YamlKeyRecord>> log) { record_ = std::move(log); }

YamlReader YamlReader::view(YAML::Node node, const std::string& path) const {
  YamlReader r(std::move(node), file_, path);
  r.overrides_ = overrides_;
  r.record_ = record_;
  return r;
}

void YamlReader::record(const std::string& key, std::string type, std::string def, std::string range) const {
  if (!record_) return;
  // A list element's index is where it sits, not part of the schema.
  std::string path;
  const std::string full = keyPath(key);
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == '[') {
      path += "[]";
      i = full.find(']', i);
      if (i == std::string::npos) break;
    } else {
      path += full[i];
    }
  }
  record_->push_back({path, std::move(type), std::move(def), std::move(range)});
}

std::string YamlReader::located(const std::string& path, int ln, const std::string& message) const {
  if (overrides_) {
    for (const auto& [set, assignment] : *overrides_) {
      const bool at = path == set;
      const bool below = path.rfind(set, 0) == 0 && path.size() > set.size() &&
                         (path[set.size()] == '.' || path[set.size()] == '[');
      // A mapping with no place in the file was created by that assignment.
      const bool created = ln <= 0 && set.rfind(path + ".", 0) == 0;
      if (at || below || created) return fmt::format("--set {}: {}: {}", assignment, path, message);
    }
  }
  return ln > 0 ? fmt::format("{}:{}: {}: {}", file_, ln, path, message) : fmt::format("{}: {}: {}", file_, path, message);
}

void YamlReader::fail(const std::string& key, const std::string& message) const {
  int ln = line();
  if (!key.empty() && node_.IsMap()) {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.Scalar() == key) {
        ln = (it->second.IsDefined() && !it->second.IsNull() ? it->second : it->first).Mark().line + 1;
        break;
      }
    }
  }
  throw ConfigError(located(keyPath(key), ln, message));
}

std::string YamlReader::describe(const YAML::Node& n) const {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "\"" + n.Scalar() + "\"";
}

bool YamlReader::has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

std::vector<std::string> YamlReader::keys() const {
  std::vector<std::string> out;
  if (node_.IsMap())
    for (auto it = node_.begin(); it != node_.end(); ++it) out.push_back(it->first.Scalar());
  return out;
}

YAML::Node YamlReader::lookup(const std::string& key) {
  used_->insert(key);
  if (!node_.IsMap()) return YAML::Node();
  return node_[key];
}

YAML::Node YamlReader::raw(const std::string& key) { return lookup(key); }

bool YamlReader::getBool(const std::string& key, bool def) {
  record(key, "boolean", def ? "true" : "false", "");
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  const std::string s = n.IsScalar() ? n.Scalar() : "";
  if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  fail(key, fmt::format("expected true or false, got {}", describe(n)));
}

int64_t YamlReader::getInt(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  record(key, "integer", fmt::format("{}", def), intRange(lo, hi));
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readInt(key, lo, hi);
}

int64_t YamlReader::requireInt(const std::string& key, int64_t lo, int64_t hi) {
  record(key, "integer", "required", intRange(lo, hi));
  return readInt(key, lo, hi);
}

int64_t YamlReader::readInt(const std::string& key, int64_t lo, int64_t hi) {
  auto n = lookup(key);
  auto range = [&] {
    if (lo == INT64_MIN && hi == INT64_MAX) return std::string("integer");
    if (hi == INT64_MAX) return fmt::format("integer >= {}", lo);
    return fmt::format("integer in [{}, {}]", lo, hi);
  };
  if (!n.IsDefined() || n.IsNull()) fail(key, fmt::format("missing required key (expected {})", range()));
  int64_t v = 0;
  if (!n.IsScalar() || !parseInt(n.Scalar(), v))
    fail(key, fmt::format("expected {}, got {}", range(), describe(n)));
  if (v < lo || v > hi) fail(key, fmt::format("expected {}, got {}", range(), v));
  return v;
}

double YamlReader::getDouble(const std::string& key, double def, double lo, double hi) {
  record(key, "number", fmt::format("{}", def), doubleRange(lo, hi));
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readDouble(key, lo, hi);
}

double YamlReader::requireDouble(const std::string& key, double lo, double hi) {
  record(key, "number", "required", doubleRange(lo, hi));
  return readDouble(key, lo, hi);
}

double YamlReader::readDouble(const std::string& key, double lo, double hi) {
  auto n = lookup(key);
  auto range = [&] {
    if (lo <= -1e308 && hi >= 1e308) return std::string("number");
    if (hi >= 1e308) return fmt::format("number >= {}", lo);
    if (lo <= -1e308) return fmt::format("number <= {}", hi);
    return fmt::format("number in [{}, {}]", lo, hi);
  };
  if (!n.IsDefined() || n.IsNull()) fail(key, fmt::format("missing required key (expected {})", range()));
  double v = 0;
  if (!n.IsScalar() || !parseDouble(n.Scalar(), v))
    fail(key, fmt::format("expected {}, got {}", range(), describe(n)));
  if (std::isnan(v) || v < lo || v > hi) fail(key, fmt::format("expected {}, got {}", range(), v));
  return v;
}

std::string YamlReader::getString(const std::string& key, const std::string& def) {
  record(key, "string", def.empty() ? "\"\"" : def, "");
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readString(key);
}

std::string YamlReader::requireString(const std::string& key) {
  record(key, "string", "required", "");
  return readString(key);
}

std::string YamlReader::readString(const std::string& key) {
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "missing required key (expected a string)");
  if (!n.IsScalar()) fail(key, fmt::format("expected a string, got {}", describe(n)));
  return n.Scalar();
}

std::string YamlReader::getEnum(const std::string& key, const std::string& def,
                                const std::vector<std::string>& choices) {
  record(key, "enum", def.empty() ? "required" : def, joinChoices(choices));
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  if (!n.IsScalar() || std::find(choices.begin(), choices.end(), n.Scalar()) == choices.end())
    fail(key, fmt::format("expected one of [{}], got {}", joinChoices(choices), describe(n)));
  return n.Scalar();
}

namespace {
template <class T, class Parse>
std::vector<T> readList(YamlReader& r, YAML::Node n, const std::string& key, const char* what, Parse parse) {
  std::vector<T> out;
  if (!n.IsSequence()) r.fail(key, fmt::format("expected a list of {}", what));
  for (size_t i = 0; i < n.size(); ++i) {
    T v{};
    if (!n[i].IsScalar() || !parse(n[i].Scalar(), v))
      r.fail(key, fmt::format("element {}: expected {}, got {}", i, what,
                              n[i].IsScalar() ? "\"" + n[i].Scalar() + "\"" : std::string("a non-scalar")));
    out.push_back(v);
  }
  return out;
}
}  // namespace

std::vector<double> YamlReader::getDoubleList(const std::string& key, const std::vector<double>& def) {
  record(key, "list of numbers", listText(def), "");
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readList<double>(*this, n, key, "numbers", parseDouble);
}

std::vector<int64_t> YamlReader::getIntList(const std::string& key, const std::vector<int64_t>& def) {
  record(key, "list of integers", listText(def), "");
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readList<int64_t>(*this, n, key, "integers", parseInt);
}

std::vector<std::string> YamlReader::getStringList(const std::string& key,
                                                   const std::vector<std::string>& def) {
  record(key, "list of strings", listText(def), "");
  auto n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return def;
  return readList<std::string>(*this, n, key, "strings", [](const std::string& s, std::string& o) {
    o = s;
    return true;
  });
}

YamlReader YamlReader::child(const std::string& key) {
  auto n = lookup(key);
  if (n.IsDefined() && !n.IsNull() && !n.IsMap())
    fail(key, fmt::format("expected a mapping, got {}", describe(n)));
  YamlReader c(n.IsDefined() ? n : YAML::Node(YAML::NodeType::Null), file_, keyPath(key));
  c.overrides_ = overrides_;
  c.record_ = record_;
  return c;
}

std::vector<YamlReader> YamlReader::childList(const std::string& key) {
  auto n = lookup(key);
  std::vector<YamlReader> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) fail(key, fmt::format("expected a list of mappings, got {}", describe(n)));
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsMap()) fail(key, fmt::format("element {}: expected a mapping, got {}", i, describe(n[i])));
    out.emplace_back(n[i], file_, fmt::format("{}[{}]", keyPath(key), i));
    out.back().overrides_ = overrides_;
    out.back().record_ = record_;
  }
  return out;
}

void YamlReader::finish() const {
  if (!node_.IsMap()) return;
  std::vector<std::string> known(used_->begin(), used_->end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (!used_->count(k)) {
      throw ConfigError(located(keyPath(k), it->first.Mark().line + 1,
                                fmt::format("unknown key (known here: {})", joinChoices(known))));
    }
  }
}

}  // namespace gradzip
