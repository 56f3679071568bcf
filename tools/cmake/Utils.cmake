# Compile settings shared by the runtime's own libraries.

# Lean, embedded-friendly objects: no exceptions/RTTI, one section per symbol so
# the linker can drop what a program does not use, hidden visibility.
function(executorch_runtime_options target)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_compile_options(${target} PRIVATE
    -fno-exceptions -fno-rtti -ffunction-sections -fdata-sections
    -Wall -Wextra)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# Links `lib` into `target` whole, so static registrations inside it survive.
function(executorch_link_whole target lib)
  target_link_libraries(${target} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${lib}>")
endfunction()
