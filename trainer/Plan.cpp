// Implements trainer/Plan.h.
#include "trainer/Plan.h"

namespace gradzip::trainer {

std::string Plan::key() const {
  std::string opts;
  if (options && options.IsMap() && options.size() > 0) {
    YAML::Emitter e;
    e << YAML::Flow << options;
    opts = e.c_str();
  }
  return compressor + opts + "@" + collective;
}

}  // namespace gradzip::trainer
