# pymx for CMake projects that embed it. `find_package(pymx CONFIG REQUIRED)` gives the imported
# target pymx::pymx: libpymx.so and the C API header <pymx/c_api.h>.
# Installed with the Python package, in <package>/share/cmake/pymx/; the directory to put in
# CMAKE_PREFIX_PATH is printed by `python -m pymx.libinfo --cmake-prefix-path`.
get_filename_component(_pymx_package "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET pymx::pymx)
  add_library(pymx::pymx SHARED IMPORTED)
  set_target_properties(pymx::pymx PROPERTIES
    IMPORTED_LOCATION "${_pymx_package}/libpymx.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_pymx_package}/include")
endif()
unset(_pymx_package)
