// Helpers shared by the libFuzzer targets of tests/fuzz: a private scratch
// directory per fuzzing process (the readers take paths, so each input is written
// to a file), gzip and plain writers, and expectOnlyUserErrors(), which runs a
// reader on one input and turns every outcome other than success or a gradzip
// UserError that names the file into a crash libFuzzer reports (abort) — an
// uncaught c10::Error, yaml-cpp or OpenCV exception, a GZ_ASSERT, or an error
// message that does not say which file was bad. Header-only.
#pragma once

#include "util/Error.h"

#include <cxxabi.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <typeinfo>
#include <unistd.h>
#include <utility>

namespace gradzip::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "\ngradzip fuzz: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A directory of this process (removed at exit); targets overwrite files in it.
inline const std::string& scratchDir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gradzip-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) fail("cannot create a scratch directory");
    static std::string removeAtExit;
    removeAtExit = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removeAtExit, ec);
    });
    return tmpl;
  }();
  return dir;
}

inline void writeFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) fail("cannot write " + path);
}

inline void writeGz(const std::string& path, std::string_view bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) fail("cannot open " + path);
  if (!bytes.empty() && gzwrite(f, bytes.data(), unsigned(bytes.size())) != int(bytes.size()))
    fail("gzwrite failed on " + path);
  gzclose(f);
}

// Runs `read`; a gradzip UserError is the expected way to refuse bad input, but
// its message must contain one of `names` (the file or directory read, say).
// Anything else thrown aborts, which libFuzzer reports as a crash with this input.
template <class F>
void expectOnlyUserErrors(std::initializer_list<std::string> names, F&& read) {
  try {
    read();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const auto& n : names)
      if (msg.find(n) != std::string::npos) return;
    fail("the UserError does not name " + *names.begin() + ": " + msg);
  } catch (const std::exception& e) {
    int status = 0;
    char* type = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    fail(std::string("not a UserError but ") + (type ? type : typeid(e).name()) + ": " + e.what());
  } catch (...) {
    fail("a non-std exception escaped");
  }
}

template <class F>
void expectOnlyUserErrors(const std::string& name, F&& read) {
  expectOnlyUserErrors({name}, std::forward<F>(read));
}

}  // namespace gradzip::fuzz
