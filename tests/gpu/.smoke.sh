set -u
export PATH=$PATH:/usr/local/cuda/bin
E=build/runtime/examples
for x in vadd stencil sgemm reduce eater server; do timeout 60 $E/gs-$x --bench 15 2>&1 | grep -v "^check"; done
GS_GPU_TIMEOUT=60 timeout 360 tests/gpu/run.sh build > $OUT/run.log 2>&1; tail -12 $OUT/run.log; grep FAIL -A8 $OUT/run.log | head -30
cp /tmp/gs-gpu.*/gshared.log $OUT/ 2>/dev/null; cp build/test-logs/gpu/gshared.log $OUT/ 2>/dev/null
