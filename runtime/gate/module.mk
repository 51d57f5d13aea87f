# runtime/gate — libgshare-gate.so, the launch gate preloaded into
# unmodified CUDA applications (docs/runtime.md, "Unmodified
# applications").  Plain C: no CUDA headers, no -lcuda, no cudart;
# -ldl -lpthread only, -z defs, hidden visibility and a version script.
# Its pure logic (gate_logic.c) is unit-tested in tests/gate.

GATE_LIB       := $(B)/runtime/gate/libgshare-gate.so
GATE_LOGIC_OBJ := $(B)/runtime/gate/gate_logic.o
# gs_rtlogic.o: the allocation's GPU check shared with libgshare (pure C);
# gs_memq.o: the device memory ledger (quota)
GATE_OBJS      := $(B)/runtime/gate/gate.o $(GATE_LOGIC_OBJ) \
		  $(B)/runtime/src/gs_rtlogic.o $(B)/runtime/src/gs_memq.o
LIBDIR         ?= $(PREFIX)/lib

LIBS += $(GATE_LIB)

$(B)/runtime/gate/%.o: CFLAGS += -fvisibility=hidden -Iruntime/gate -Iruntime/src

$(GATE_LIB): $(GATE_OBJS) $(GSCOMMON) runtime/gate/libgshare-gate.map
	$(CC) -shared -o $@ $(GATE_OBJS) $(GSCOMMON) $(LDFLAGS) \
	    -Wl,-z,defs -Wl,-soname,libgshare-gate.so \
	    -Wl,--version-script=runtime/gate/libgshare-gate.map \
	    -ldl -lpthread

INSTALL_RULES += install-gate
.PHONY: install-gate
install-gate: $(GATE_LIB)
	install -d $(DESTDIR)$(LIBDIR)/gshare
	install -m 0755 $(GATE_LIB) $(DESTDIR)$(LIBDIR)/gshare/libgshare-gate.so
