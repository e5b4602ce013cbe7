// The one explicit model factory (STYLE.md §4): maps ModelOptions::name to a
// constructed, initialised model. Unknown names fail with the list of known ones.
#pragma once

#include "models/Model.h"
#include "models/ModelOptions.h"

#include <memory>
#include <string>
#include <vector>

namespace gradzip::models {

// Validates `options` (ConfigError naming the key on a bad value or an unknown
// name, listing the known names) and builds the model on the CPU in training
// mode with its reference initialisation drawn from the current global torch
// generator (seed it with torch::manual_seed for reproducible weights).
std::shared_ptr<Model> makeModel(const ModelOptions& options);

// Every registry name, sorted.
std::vector<std::string> modelNames();

}  // namespace gradzip::models
