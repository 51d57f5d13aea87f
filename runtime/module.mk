# runtime/ — libgshare, the job-side runtime (CUDA), its examples, unit
# tests of the host-side logic and the GPU test/benchmark programs.
#
# The pure host logic (gs_rtlogic.c) builds and is unit-tested everywhere.
# Everything that needs nvcc (the library, examples, GPU benches) is built
# only where $(NVCC) exists; elsewhere `make` says so once and goes on.
# GPU programs target sm_90 with PTX for compute_90 embedded.

NVCC      ?= /usr/local/cuda/bin/nvcc
CUDA_HOME ?= /usr/local/cuda
CUDA_INC  := $(CUDA_HOME)/include
CUDA_LIB  := $(CUDA_HOME)/lib64
NVARCH    := -gencode arch=compute_90,code=[sm_90,compute_90]
NVFLAGS   := -std=c++17 -O3 $(NVARCH) -Iruntime/include -Iruntime/src \
	     -Icommon -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra

RT_LOGIC_OBJ := $(B)/runtime/src/gs_rtlogic.o
RT_UNIT      := $(B)/runtime/tests/test_rtlogic
UNIT_TESTS   += $(RT_UNIT)

$(RT_UNIT): $(B)/runtime/tests/test_rtlogic.o $(RT_LOGIC_OBJ) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# task pools: the host TaskTable and the device header's allocator
RT_TT_OBJ  := $(B)/runtime/src/gs_tasktable.o
RT_TT_UNIT := $(B)/runtime/tests/test_tasktable
UNIT_TESTS += $(RT_TT_UNIT)
$(RT_TT_UNIT): $(B)/runtime/tests/test_tasktable.o $(RT_TT_OBJ) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# the job side's device memory ledger (gs_memq.c): pure host code, for
# the launch gate's allocation hooks and libgshare
RT_MEMQ_OBJ  := $(B)/runtime/src/gs_memq.o
RT_MEMQ_UNIT := $(B)/runtime/tests/test_memq
UNIT_TESTS   += $(RT_MEMQ_UNIT)
$(RT_MEMQ_UNIT): $(B)/runtime/tests/test_memq.o $(RT_MEMQ_OBJ) $(GSCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lpthread

$(B)/runtime/%.o: CFLAGS += -Iruntime/src -Iruntime/include

HAVE_NVCC := $(wildcard $(NVCC))

ifeq ($(HAVE_NVCC),)
$(info runtime: $(NVCC) not found: libgshare, examples and GPU programs are not built (set NVCC=...))
else

LIBGSHARE   := $(B)/runtime/libgshare.so
LIBGSHARE1  := $(B)/runtime/libgshare.so.1
RT_EXAMPLES := vadd stencil sgemm reduce eater server tasks softmax hist triad
RT_EX_BINS  := $(RT_EXAMPLES:%=$(B)/runtime/examples/gs-%)
RT_BENCH_BINS := $(B)/runtime/bench/gs-mech $(B)/runtime/bench/gs-mech-nogate \
		 $(B)/runtime/bench/gs-mech-probe \
		 $(B)/runtime/bench/gs-loopab \
		 $(B)/runtime/bench/gs-taskbench $(B)/runtime/bench/gs-smprobe \
		 $(B)/runtime/bench/gs-hostpoll
LIBS += $(LIBGSHARE) $(LIBGSHARE1)
BINS += $(RT_EX_BINS) $(RT_BENCH_BINS)

# The agent session (gs_session.c, gs_client.c) comes from $(GSCOMMON).
RT_LIB_OBJS := $(B)/runtime/src/gshare.o $(B)/runtime/src/gs_watch_cu.o \
	       $(B)/runtime/src/gs_smmap_cu.o $(B)/runtime/src/gs_green.o \
	       $(RT_LOGIC_OBJ) $(B)/runtime/src/gs_task.o $(RT_TT_OBJ)

$(B)/runtime/src/gshare.o: CFLAGS += -I$(CUDA_INC) -fvisibility=hidden
$(B)/runtime/src/gs_task.o: CFLAGS += -I$(CUDA_INC) -fvisibility=hidden
$(B)/runtime/src/gs_green.o: CFLAGS += -I$(CUDA_INC) -fvisibility=hidden

$(B)/runtime/src/gs_watch_cu.o: runtime/src/gs_watch.cu runtime/src/gs_watch.h
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(B)/runtime/src/gs_smmap_cu.o: runtime/src/gs_smmap.cu runtime/src/gs_smmap.h
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(LIBGSHARE): $(LIBGSHARE1)
	ln -sf libgshare.so.1 $@

$(LIBGSHARE1): $(RT_LIB_OBJS) $(GSCOMMON) runtime/src/libgshare.map
	$(CC) -shared -o $@ $(RT_LIB_OBJS) $(GSCOMMON) $(LDFLAGS) \
	    -Wl,-soname,libgshare.so.1 \
	    -Wl,--version-script=runtime/src/libgshare.map \
	    -L$(CUDA_LIB) -Wl,-rpath,$(CUDA_LIB) -lcudart -lstdc++ -lpthread

RT_EX_DEPS := runtime/examples/ex_common.h runtime/include/gshare.h \
	      runtime/include/gshare_device.cuh $(LIBGSHARE)

$(B)/runtime/examples/gs-%: runtime/examples/%.cu $(RT_EX_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -cudart shared -o $@ $< \
	    -L$(B)/runtime -lgshare -Xlinker -rpath,'$$ORIGIN/..' \
	    -Xlinker -rpath,$(CUDA_LIB)

$(B)/runtime/bench/gs-%: runtime/bench/%.cu $(RT_EX_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -cudart shared -o $@ $< \
	    -L$(B)/runtime -lgshare -Xlinker -rpath,'$$ORIGIN/..' \
	    -Xlinker -rpath,$(CUDA_LIB)

# the placement probe also calls the driver's green-context API
$(B)/runtime/bench/gs-smprobe: runtime/bench/smprobe.cu $(RT_EX_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -cudart shared -o $@ $< \
	    -L$(CUDA_LIB)/stubs -lcuda -Xlinker -rpath,$(CUDA_LIB)

# diagnostic twin: the suspend flag re-read at every block-task boundary
$(B)/runtime/bench/gs-mech-nogate: runtime/bench/mech.cu $(RT_EX_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -DGS_FLAG_GATE_CYCLES=0 -cudart shared -o $@ $< \
	    -L$(B)/runtime -lgshare -Xlinker -rpath,'$$ORIGIN/..' \
	    -Xlinker -rpath,$(CUDA_LIB)

# diagnostic twin: device timestamps of each eviction (GS_EVPROBE)
$(B)/runtime/bench/gs-mech-probe: runtime/bench/mech.cu $(RT_EX_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -DGS_EVPROBE -cudart shared -o $@ $< \
	    -L$(B)/runtime -lgshare -Xlinker -rpath,'$$ORIGIN/..' \
	    -Xlinker -rpath,$(CUDA_LIB)

# The eviction-split tool (tests/gpu/evict_split.py) on made-up records.
INTEG_TESTS += runtime/tests/evict_split_test.py
# The benchmarks' table (tests/gpu/bench_table.py) on made-up sharing logs.
INTEG_TESTS += runtime/tests/bench_table_test.py

# The C API on any machine (no GPU: gs_init must fail cleanly).
RT_API_TEST := $(B)/runtime/tests/test_api
UNIT_TESTS  += $(RT_API_TEST)
$(B)/runtime/tests/test_api.o: CFLAGS += -I$(CUDA_INC)
$(RT_API_TEST): $(B)/runtime/tests/test_api.o $(LIBGSHARE)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/runtime -lgshare \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,-rpath,$(CUDA_LIB) -lcmocka

INSTALL_RULES += install-runtime
.PHONY: install-runtime
INCLUDEDIR ?= $(PREFIX)/include
install-runtime: $(LIBGSHARE)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 0644 $(LIBGSHARE1) $(DESTDIR)$(LIBDIR)/libgshare.so.1
	ln -sf libgshare.so.1 $(DESTDIR)$(LIBDIR)/libgshare.so
	install -m 0644 runtime/include/gshare.h \
	    runtime/include/gshare_device.cuh $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(GS_VERSION)|' \
	    runtime/gshare.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/gshare.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/gshare.pc
	install -d $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 0644 docs/man/libgshare.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
		echo ldconfig; ldconfig; fi

endif
