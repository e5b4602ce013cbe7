// Test helper: the message of the UserError a callable throws, for tests that
// assert what an error names.
#pragma once

#include "util/Error.h"

#include <functional>
#include <string>

namespace gradzip::testing {

// f()'s UserError message, or "(no UserError)" when it returns normally.
inline std::string userErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

}  // namespace gradzip::testing
