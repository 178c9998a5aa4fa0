# SPROFIL_SANITIZE=ON builds the host side (profile, symbolize, report, the tool) and the test
# programs with AddressSanitizer and UBSan. The runtime library is never instrumented: it is
# preloaded into programs that are not, and must depend on libc only (its memory safety is
# checked by faces_cycles_asan and the reader's fuzz tests instead).
option(SPROFIL_SANITIZE "Build host code and tests with ASan and UBSan" OFF)
set(SPROFIL_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)

function(sprofil_sanitize)
  if(SPROFIL_SANITIZE)
    foreach(target ${ARGN})
      target_compile_options(${target} PRIVATE ${SPROFIL_SANITIZER_FLAGS})
      # PUBLIC: whatever links a sanitized static library links the sanitizer runtimes too.
      target_link_options(${target} PUBLIC ${SPROFIL_SANITIZER_FLAGS})
    endforeach()
  endif()
endfunction()
