# OpenCV for gradzip_data. The core module is required: data/Transforms.h
# crops and flips with it. imgproc and imgcodecs decode image folders only
# (data/ImageFolder.h), and imgcodecs brings a large tree of libraries (GDAL
# among them) that a GPU machine without a package registry cannot carry
# (scripts/gpu_check.sh). GRADZIP_IMAGE_FOLDER: AUTO builds image folders
# where those modules are found, ON requires them, OFF leaves them out; a
# build without them answers `dataset: image_folder` with an error naming the
# build (data/ImageFolderUnavailable.cpp).
# Defines GRADZIP_OPENCV_LIBS and GRADZIP_HAVE_IMAGE_FOLDER.
set(GRADZIP_IMAGE_FOLDER AUTO CACHE STRING "Decode image-folder datasets with OpenCV imgcodecs: AUTO, ON or OFF")
set_property(CACHE GRADZIP_IMAGE_FOLDER PROPERTY STRINGS AUTO ON OFF)

set(GRADZIP_HAVE_IMAGE_FOLDER OFF)
if(NOT GRADZIP_IMAGE_FOLDER STREQUAL "OFF")
  find_package(OpenCV QUIET COMPONENTS core imgproc imgcodecs)
  if(OpenCV_FOUND)
    set(GRADZIP_HAVE_IMAGE_FOLDER ON)
    set(GRADZIP_OPENCV_LIBS ${OpenCV_LIBS})
  elseif(GRADZIP_IMAGE_FOLDER STREQUAL "ON")
    message(FATAL_ERROR "gradzip: GRADZIP_IMAGE_FOLDER=ON but OpenCV's core, imgproc and imgcodecs were not found "
                        "(Debian: libopencv-dev)")
  endif()
endif()

if(NOT GRADZIP_HAVE_IMAGE_FOLDER)
  # The core module alone, found directly: OpenCV's CMake package refuses to
  # load when the files of its other modules are absent.
  find_path(GRADZIP_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
  find_library(GRADZIP_OPENCV_CORE_LIBRARY NAMES opencv_core)
  if(NOT GRADZIP_OPENCV_INCLUDE_DIR OR NOT GRADZIP_OPENCV_CORE_LIBRARY)
    message(FATAL_ERROR "gradzip: OpenCV's core module was not found (Debian: libopencv-core-dev)")
  endif()
  add_library(gradzip_opencv_core INTERFACE)
  target_include_directories(gradzip_opencv_core SYSTEM INTERFACE "${GRADZIP_OPENCV_INCLUDE_DIR}")
  target_link_libraries(gradzip_opencv_core INTERFACE "${GRADZIP_OPENCV_CORE_LIBRARY}")
  set(GRADZIP_OPENCV_LIBS gradzip_opencv_core)
  message(STATUS "gradzip: image-folder datasets left out (GRADZIP_IMAGE_FOLDER=${GRADZIP_IMAGE_FOLDER}); "
                 "OpenCV core from ${GRADZIP_OPENCV_CORE_LIBRARY}")
endif()
