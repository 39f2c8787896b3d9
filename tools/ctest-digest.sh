#!/usr/bin/env bash
# The failed tests of the last ctest run in a build directory, each with the
# end of its output (30 lines, a sanitizer's shadow-byte map left out; the
# first 6 tests). tools/run-tests.sh and .ci/run print it last, so a log
# that keeps only its final lines, as CI's does, still says which test
# failed and why.
#
#   tools/ctest-digest.sh BUILD_DIR
set -u
dir=${1:?usage: ctest-digest.sh BUILD_DIR}/Testing/Temporary
if [[ ! -s $dir/LastTestsFailed.log ]]; then
  echo "ctest-digest: $1: no failed test on record (the configure or the build failed)"
  exit 0
fi
echo "ctest-digest: $1: failed tests:"
sed 's/^[0-9]*:/  /' "$dir/LastTestsFailed.log"
n=0
while IFS= read -r line && ((n++ < 6)); do
  name=${line#*:}
  echo "ctest-digest: --- the end of $name's output"
  awk -v t="$name" '
    index($0, "Testing: " t) { on = 1; k = 0; next }  # the last run counts
    on && /^<end of output>$/ { on = 0; next }
    # An ASan report ends in a shadow-byte map: keep its first lines instead.
    on && /^Shadow bytes around the buggy address:/ { shadow = 1; next }
    on && shadow && /==[0-9]+==ABORTING/ { shadow = 0 }
    on && !shadow { buf[k++ % 30] = $0 }
    END { for (i = (k > 30 ? k - 30 : 0); i < k; i++) print "  " buf[i % 30] }
  ' "$dir/LastTest.log"
done <"$dir/LastTestsFailed.log"
