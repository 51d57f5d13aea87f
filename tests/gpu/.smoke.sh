set -u
export PATH=$PATH:/usr/local/cuda/bin
GS_GPU_TIMEOUT=60 timeout 330 tests/gpu/run.sh build 2>&1 | tee $OUT/run.log
GS_BENCH_RUN_S=5 timeout 250 tests/gpu/bench build $OUT/b 2>&1 | tail -n 40
cp build/test-logs/gpu/*eater* build/test-logs/gpu/*server-forced* $OUT/ 2>/dev/null | head -0
