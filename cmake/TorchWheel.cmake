# Locates LibTorch inside the pinned PyPI torch wheel (installed by scripts/setup.sh
# into .venv) and defines two imported targets:
#   gradzip::torch       torch_cpu + c10, c10d with Gloo; no CUDA toolkit needed
#   gradzip::torch_cuda  torch_cuda + c10_cuda + NCCL (only with GRADZIP_CUDA)
# The wheel's own TorchConfig.cmake insists on a CUDA toolkit because the wheel is
# a CUDA build, so the CPU build links the two libraries directly (DESIGN.md §2).

# Under pip (scikit-build-core), the interpreter pip runs: its environment's torch.
if(SKBUILD AND DEFINED Python_EXECUTABLE)
  set(_gradzip_python "${Python_EXECUTABLE}")
else()
  set(_gradzip_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
endif()
set(GRADZIP_PYTHON "${_gradzip_python}" CACHE FILEPATH
    "Python interpreter of the virtual environment holding the pinned torch wheel")
if(NOT EXISTS "${GRADZIP_PYTHON}")
  message(FATAL_ERROR "gradzip: ${GRADZIP_PYTHON} not found. Run scripts/setup.sh first "
                      "(it creates .venv with the pinned torch wheel), or pass -DGRADZIP_PYTHON=...")
endif()

# find_spec does not import torch, so this works even where torch's CUDA libraries
# could not be loaded.
execute_process(
  COMMAND "${GRADZIP_PYTHON}" -c
    "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])"
  OUTPUT_VARIABLE TORCH_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR NOT EXISTS "${TORCH_ROOT}/lib/libtorch_cpu.so")
  message(FATAL_ERROR "gradzip: no torch wheel found through ${GRADZIP_PYTHON}; run scripts/setup.sh")
endif()
file(READ "${TORCH_ROOT}/version.py" _torch_version_py)
string(REGEX MATCH "__version__ = '([^']+)'" _m "${_torch_version_py}")
set(GRADZIP_TORCH_VERSION "${CMAKE_MATCH_1}")
message(STATUS "gradzip: LibTorch ${GRADZIP_TORCH_VERSION} from ${TORCH_ROOT}")

# The wheel's libraries find their CUDA runtime stubs through their own RPATH
# ($ORIGIN/../../nvidia/cu13/lib); our binaries only need the torch/lib directory.
set(TORCH_LIB_DIR "${TORCH_ROOT}/lib")
# The wheel's include directory also carries its own copy of fmt (12.x), which
# would shadow Debian's fmt 9 that spdlog was built against. Expose the wheel's
# headers through a directory of symlinks that leaves fmt out.
set(TORCH_INCLUDE_SHADOW "${CMAKE_BINARY_DIR}/torch-include")
file(MAKE_DIRECTORY "${TORCH_INCLUDE_SHADOW}")
file(GLOB _torch_inc_entries RELATIVE "${TORCH_ROOT}/include" "${TORCH_ROOT}/include/*")
foreach(_e ${_torch_inc_entries})
  if(NOT _e STREQUAL "fmt" AND NOT EXISTS "${TORCH_INCLUDE_SHADOW}/${_e}")
    file(CREATE_LINK "${TORCH_ROOT}/include/${_e}" "${TORCH_INCLUDE_SHADOW}/${_e}" SYMBOLIC)
  endif()
endforeach()
add_library(gradzip_torch_cpu INTERFACE)
target_include_directories(gradzip_torch_cpu SYSTEM INTERFACE
  "${TORCH_INCLUDE_SHADOW}" "${TORCH_ROOT}/include/torch/csrc/api/include")
target_compile_definitions(gradzip_torch_cpu INTERFACE USE_DISTRIBUTED USE_C10D_GLOO)
target_link_libraries(gradzip_torch_cpu INTERFACE
  "${TORCH_LIB_DIR}/libtorch_cpu.so" "${TORCH_LIB_DIR}/libc10.so" Threads::Threads)
target_link_options(gradzip_torch_cpu INTERFACE "LINKER:-rpath,${TORCH_LIB_DIR}")
add_library(gradzip::torch ALIAS gradzip_torch_cpu)

# ProcessGroupGloo.hpp includes gloo headers that the wheel does not ship; Debian's
# libgloo-dev provides them (declarations only; the code lives in libtorch_cpu).
find_path(GLOO_INCLUDE_DIR gloo/algorithm.h REQUIRED)
target_include_directories(gradzip_torch_cpu SYSTEM INTERFACE "${GLOO_INCLUDE_DIR}")

# --- optional CUDA/NCCL path -------------------------------------------------
# GRADZIP_CUDA=AUTO turns it on when a CUDA toolkit is found. It only has to
# compile and link here; nothing CUDA runs on the development machines.
set(GRADZIP_HAVE_CUDA OFF)
if(NOT GRADZIP_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND EXISTS "${TORCH_LIB_DIR}/libtorch_cuda.so")
    set(GRADZIP_HAVE_CUDA ON)
  elseif(GRADZIP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "gradzip: GRADZIP_CUDA=ON but no CUDA toolkit (or no libtorch_cuda.so in the wheel) was found")
  else()
    message(STATUS "gradzip: no CUDA toolkit found; building the CPU path only")
  endif()
endif()
if(GRADZIP_HAVE_CUDA)
  message(STATUS "gradzip: CUDA ${CUDAToolkit_VERSION} found; compiling the NCCL path")
  get_filename_component(_nvidia_root "${TORCH_ROOT}/../nvidia" ABSOLUTE)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS "${_nvidia_root}/nccl/include" "${CUDAToolkit_INCLUDE_DIRS}" REQUIRED)
  add_library(gradzip_torch_cuda INTERFACE)
  target_include_directories(gradzip_torch_cuda SYSTEM INTERFACE "${NCCL_INCLUDE_DIR}")
  target_compile_definitions(gradzip_torch_cuda INTERFACE USE_C10D_NCCL USE_CUDA)
  target_link_libraries(gradzip_torch_cuda INTERFACE gradzip_torch_cpu CUDA::cudart
    "${TORCH_LIB_DIR}/libtorch_cuda.so" "${TORCH_LIB_DIR}/libc10_cuda.so")
  add_library(gradzip::torch_cuda ALIAS gradzip_torch_cuda)
endif()
