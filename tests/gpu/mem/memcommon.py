"""Shared by the tests/gpu/mem helpers: check lines (printed PASS/FAIL/SKIP
with the figures and appended as JSON to the results file), NVML's
device-wide memory figures (ground truth the gate does not touch) and
the driver entry points through ctypes.

As a command: memcommon.py check FILE NAME pass|fail|skip DETAIL"""
import ctypes
import json
import sys

GIB = 1 << 30
MIB = 1 << 20


def gib(n):
    return "%.2f GiB" % (n / GIB) if n is not None else "?"


class Results:
    def __init__(self, path, tag):
        self.path, self.tag, self.failed = path, tag, False

    def emit(self, rec):
        rec.setdefault("tag", self.tag)
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def check(self, name, ok, detail):
        word = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
        print("  %s %s: %s" % (word, name, detail), flush=True)
        if ok is False:
            self.failed = True
        self.emit({"check": name, "ok": ok, "detail": detail})


class Nvml:
    """GPU 0's memory through libnvidia-ml (None without).  Under the
    gate, nvmlDeviceGetMemoryInfo answers with the allocation's view
    (view()); the ground truth, used(), is the sum of what NVML lists for
    the GPU's compute processes (nvmlDeviceGetComputeRunningProcesses_v3,
    which the gate leaves alone), the device-wide figure where that
    listing is not available."""

    class Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong),
                    ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    class Proc(ctypes.Structure):       # nvmlProcessInfo_t
        _fields_ = [("pid", ctypes.c_uint),
                    ("usedGpuMemory", ctypes.c_ulonglong),
                    ("gpuInstanceId", ctypes.c_uint),
                    ("computeInstanceId", ctypes.c_uint)]

    def __init__(self):
        self.h = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            h = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) != 0:
                return
            self.lib, self.h = lib, h
        except OSError:
            pass

    def procs_used(self):
        """what the GPU's compute processes hold together (0 when none is
        listed: the checks that use it demand more than 0), or None"""
        if self.h is None:
            return None
        n = ctypes.c_uint(64)
        procs = (Nvml.Proc * 64)()
        try:
            f = self.lib.nvmlDeviceGetComputeRunningProcesses_v3
        except AttributeError:
            return None
        if f(self.h, ctypes.byref(n), procs) != 0:
            return None
        return sum(procs[i].usedGpuMemory for i in range(n.value)
                   if procs[i].usedGpuMemory < (1 << 62))

    def used(self):
        u = self.procs_used()
        if u is not None:
            return u
        return self.view()[2]

    def view(self):
        """(total, free, used) as nvmlDeviceGetMemoryInfo answers this
        process (the allocation's view under the gate)"""
        if self.h is None:
            return (None, None, None)
        m = Nvml.Mem()
        if self.lib.nvmlDeviceGetMemoryInfo(self.h, ctypes.byref(m)) != 0:
            return (None, None, None)
        return (m.total, m.free, m.used)

    def free(self):
        if self.h is None:
            return None
        m = Nvml.Mem()
        if self.lib.nvmlDeviceGetMemoryInfo(self.h, ctypes.byref(m)) != 0:
            return None
        return m.free


class Driver:
    """cuMemAlloc_v2 / cuMemFree_v2 / cuMemGetInfo_v2 as an application
    linked against libcuda reaches them: looked up by name in
    libcuda.so.1 (dlsym, which the gate interposes, so under LD_PRELOAD
    these are the gate's hooks).  A primary context on device 0."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.lib = lib
        self.alloc_fn = lib.cuMemAlloc_v2
        self.alloc_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                  ctypes.c_size_t]
        self.free_fn = lib.cuMemFree_v2
        self.free_fn.argtypes = [ctypes.c_uint64]
        self.info_fn = lib.cuMemGetInfo_v2
        self.info_fn.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
        rc = lib.cuInit(0)
        if rc != 0:
            raise RuntimeError("cuInit: %d" % rc)
        dev = ctypes.c_int()
        ctx = ctypes.c_void_p()
        for what, rc in (
                ("cuDeviceGet", lib.cuDeviceGet(ctypes.byref(dev), 0)),
                ("cuDevicePrimaryCtxRetain",
                 lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                ("cuCtxSetCurrent", lib.cuCtxSetCurrent(ctx))):
            if rc != 0:
                raise RuntimeError("%s: %d" % (what, rc))
        self.ptr = ctypes.c_uint64()
        self.pref = ctypes.byref(self.ptr)

    def direct(self):
        """(alloc, free): cuMemAlloc_v2 / cuMemFree_v2 as the driver
        exports them, past any interposer: looked up with glibc's own
        dlsym (reached through dlvsym on libc, which the gate leaves
        alone), as the gate itself reaches the driver.  Under the gate,
        memory taken this way is not charged (use the pair together)."""
        libc = ctypes.CDLL("libc.so.6")
        dlvsym = libc.dlvsym
        dlvsym.restype = ctypes.c_void_p
        dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        addr = (dlvsym(libc._handle, b"dlsym", b"GLIBC_2.34") or
                dlvsym(libc._handle, b"dlsym", b"GLIBC_2.2.5"))
        if not addr:
            raise RuntimeError("no dlsym in libc")
        real = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_char_p)(addr)
        fa = real(self.lib._handle, b"cuMemAlloc_v2")
        ff = real(self.lib._handle, b"cuMemFree_v2")
        if not fa or not ff:
            raise RuntimeError("driver symbols not found")
        alloc = ctypes.CFUNCTYPE(ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_uint64),
                                 ctypes.c_size_t)(fa)
        free = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)(ff)
        return alloc, free

    def alloc(self, n):
        """(CUresult, pointer)"""
        rc = self.alloc_fn(self.pref, n)
        return rc, self.ptr.value

    def free(self, p):
        return self.free_fn(p)

    def info(self):
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        rc = self.info_fn(ctypes.byref(f), ctypes.byref(t))
        return (f.value, t.value) if rc == 0 else (None, None)


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] != "check":
        sys.exit(__doc__)
    r = Results(sys.argv[2], "run.sh")
    r.check(sys.argv[3], {"pass": True, "fail": False,
                          "skip": None}[sys.argv[4]], sys.argv[5])
