// Precompiled header shared by every gradzip target: the expensive, stable
// third-party headers (LibTorch, c10d, spdlog, fmt). Our own headers stay out so
// editing them never invalidates the PCH.
#pragma once
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <spdlog/spdlog.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
