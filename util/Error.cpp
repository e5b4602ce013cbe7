// Out-of-line part of util/Error.h: the message of a failed internal assertion.
#include "util/Error.h"

namespace gradzip::detail {

void internalAssertFail(const char* expr, const char* file, int line, const std::string& msg) {
  throw std::logic_error(fmt::format("gradzip internal error at {}:{}: `{}` failed{}{} "
                                     "(this is a bug in gradzip; please report it)",
                                     file, line, expr, msg.empty() ? "" : ": ", msg));
}

}  // namespace gradzip::detail
