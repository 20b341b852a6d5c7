# Embeds every specs/**/*.toml into a generated C++ source so that built-in names
# work from any directory. The generator re-runs when a spec file changes.
file(GLOB_RECURSE LATHE_SPEC_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/specs/*.toml)
set(LATHE_EMBEDDED_SPECS_CPP ${CMAKE_BINARY_DIR}/generated/embedded_specs.cpp)
add_custom_command(
  OUTPUT ${LATHE_EMBEDDED_SPECS_CPP}
  COMMAND ${CMAKE_COMMAND} -DSPEC_ROOT=${CMAKE_SOURCE_DIR}/specs -DOUT=${LATHE_EMBEDDED_SPECS_CPP}
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_specs_gen.cmake
  DEPENDS ${LATHE_SPEC_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_specs_gen.cmake
  COMMENT "Embedding built-in specs"
  VERBATIM)
