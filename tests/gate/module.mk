# tests/gate — the launch gate without a GPU: unit tests of its logic, a
# stand-in libcuda.so.1 (standin_cuda.c), a program that calls the driver
# the way the CUDA runtime does (gate_app.c), and an integration test
# with the real agent (integ_gate.sh).

GATE_STANDIN := $(B)/tests/gate/standin/libcuda.so.1
GATE_APP     := $(B)/tests/gate/gate_app
GATE_UNIT    := $(B)/tests/gate/test_gatelogic
GATE_FAKE_L2 := $(B)/tests/gate/fake_libgshare.so

$(B)/tests/gate/%.o: CFLAGS += -Iruntime/gate -Itests/gate
# the stand-in defines driver entry points that no header declares
$(B)/tests/gate/standin_cuda.o: CFLAGS += -Wno-missing-prototypes

$(GATE_STANDIN): $(B)/tests/gate/standin_cuda.o
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^ $(LDFLAGS) -Wl,-soname,libcuda.so.1 \
	    -Wl,-Bsymbolic -lpthread

$(GATE_FAKE_L2): $(B)/tests/gate/fake_libgshare.o
	$(CC) -shared -o $@ $^ $(LDFLAGS)

$(GATE_APP): $(B)/tests/gate/gate_app.o
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

# device memory through the gate (mem_gate.sh)
GATE_MEM_APP := $(B)/tests/gate/mem_app
$(GATE_MEM_APP): $(B)/tests/gate/mem_app.o
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread
TEST_HELPERS += $(GATE_MEM_APP)
INTEG_TESTS  += tests/gate/mem_gate.sh

$(GATE_UNIT): $(B)/tests/gate/test_gatelogic.o $(GATE_LOGIC_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lpthread

UNIT_TESTS   += $(GATE_UNIT)
TEST_HELPERS += $(GATE_STANDIN) $(GATE_APP) $(GATE_LIB) $(GATE_FAKE_L2)
# gshared + gated stand-in jobs: interposition, window, weights, idle
# release, kill -9, fork, opt-out (about 15 s).
INTEG_TESTS  += tests/gate/integ_gate.sh
