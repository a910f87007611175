# fold_label_pure(test source): labels a test "pure" when its source runs no ranks
# (no loopback harness threads, no processes of its own): one thread at a time, so
# scripts/test.sh runs such tests nproc at a time (ctest -L pure -j) and every other
# test alone. The source decides, so a test that starts using ranks leaves the label.
function(fold_label_pure test source)
  file(READ ${source} text)
  if(NOT text MATCHES "lh_run|pthread_create|fork\\(|popen|system\\(|posix_spawn")
    set_property(TEST ${test} APPEND PROPERTY LABELS pure)
  endif()
endfunction()
