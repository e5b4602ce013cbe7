// Strict, typed reading of YAML configuration (yaml-cpp). A YamlReader is a view
// of one mapping: every key it hands out is marked as used, and finish() rejects
// any key left over. Every error names file, line and the dotted key path, e.g.
//   configs/x.yaml:12: compress.thc.bits: expected integer in [1, 16], got "four"
// A key given twice in one mapping is an error (yaml-cpp would keep the first
// silently). Values set on the command line (`--set a.b=v`) are named by that
// argument instead of a file line: see setOverrides.
// Components parse their own `XOptions::fromYaml(YamlReader&)` with it and write
// the effective values back with `toYaml(YAML::Node&)` (STYLE.md §5). A reader
// can also record every key it is asked for (recordInto), which is how
// `gradzip config --reference` prints the schema from the parsers themselves.
#pragma once

#include "util/Error.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace gradzip {

// One key as a parser asked for it (STYLE.md §19: the reference is generated).
struct YamlKeyRecord {
  std::string path;   // dotted; the elements of a list of mappings as "key[]"
  std::string type;   // boolean, integer, number, string, enum, list of integers|numbers|strings
  std::string def;    // the default as YAML text; "required" when the key has none
  std::string range;  // "[1, 16]", ">= 0", "<= 5" or the choices "a, b"; empty: any value of the type
};

class YamlReader {
 public:
  // Parses a file; malformed YAML and duplicate keys become a ConfigError
  // naming file and line.
  static YamlReader loadFile(const std::string& path);
  // Parses text (tests, embedded defaults); `origin` plays the file name.
  static YamlReader loadString(const std::string& text, const std::string& origin = "<string>");
  // A view of `node`, which must be a mapping (or null, read as empty).
  YamlReader(YAML::Node node, std::string file, std::string path);

  bool has(const std::string& key) const;
  std::vector<std::string> keys() const;

  // Optional scalars: the default when the key is absent; bounds are inclusive.
  bool getBool(const std::string& key, bool def);
  int64_t getInt(const std::string& key, int64_t def, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  double getDouble(const std::string& key, double def, double lo = -1e308, double hi = 1e308);
  std::string getString(const std::string& key, const std::string& def);
  // One of `choices`; the error lists them.
  std::string getEnum(const std::string& key, const std::string& def, const std::vector<std::string>& choices);
  std::vector<double> getDoubleList(const std::string& key, const std::vector<double>& def);
  std::vector<int64_t> getIntList(const std::string& key, const std::vector<int64_t>& def);
  std::vector<std::string> getStringList(const std::string& key, const std::vector<std::string>& def);

  // Required scalars: absence is an error naming the key.
  int64_t requireInt(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  double requireDouble(const std::string& key, double lo = -1e308, double hi = 1e308);
  std::string requireString(const std::string& key);

  // Nested mapping (an absent key gives an empty mapping), or a sequence of mappings.
  YamlReader child(const std::string& key);
  std::vector<YamlReader> childList(const std::string& key);
  // The raw node (marks the key used); for values whose shape depends on a type key.
  YAML::Node raw(const std::string& key);

  // Throws ConfigError if any key of this mapping was never read (typos).
  void finish() const;

  // Dotted key paths whose values came from command-line assignments, with
  // the assignment as the user typed it ("train.epochs" -> "train.epochs=x").
  // Errors at such a path, below it, or at a mapping --set created, name
  // "--set <assignment>" instead of a file line. Shared with every child
  // reader made after the call.
  void setOverrides(std::map<std::string, std::string> overrides);
  // Appends a YamlKeyRecord to `log` for every get*/require*/getEnum call on
  // this reader and on the readers it hands out afterwards (child, childList,
  // view), in call order, whether or not the key is present. Parsing is
  // unchanged. Keys read only through raw() are not recorded.
  void recordInto(std::shared_ptr<std::vector<YamlKeyRecord>> log);
  // A reader of `node` (a mapping or null) at dotted `path`, with this
  // reader's file, overrides and record log.
  YamlReader view(YAML::Node node, const std::string& path) const;

  // "file:line: path.key: message", pointing at `key` if present, else at this mapping.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  int line() const;  // 1-based line of this mapping, 0 if unknown

 private:
  YAML::Node lookup(const std::string& key);
  void record(const std::string& key, std::string type, std::string def, std::string range) const;
  int64_t readInt(const std::string& key, int64_t lo, int64_t hi);
  double readDouble(const std::string& key, double lo, double hi);
  std::string readString(const std::string& key);
  std::string keyPath(const std::string& key) const;
  std::string describe(const YAML::Node& n) const;
  // "file:line: path: message", or "--set a=b: path: message" for a path that
  // a command-line assignment set.
  std::string located(const std::string& path, int line, const std::string& message) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<std::set<std::string>> used_;
  std::shared_ptr<const std::map<std::string, std::string>> overrides_;
  std::shared_ptr<std::vector<YamlKeyRecord>> record_;  // null: not recording
};

// Throws ConfigError naming `origin`, the line of the repeat and of the first
// occurrence for any key that appears twice in one mapping of `node`.
void rejectDuplicateKeys(const YAML::Node& node, const std::string& origin, const std::string& path = "");

}  // namespace gradzip
