#!/usr/bin/python3
"""Integration test of gshare-device-plugin against a real gshared
(simulated GPUs) and the kubelet stand-in (kubelet_standin.py).

    test_plugin.py [--valgrind] [--allocs N] [--bench FILE]

Cases: registration; 100 devices per simulated GPU; preferred allocation
packs; Allocate returns the environment and the mount and the agent shows
the allocation, labelled from PodResources; bad requests get a gRPC error
with a readable message and the plugin keeps serving; allocations of
deleted pods are closed; health flips when the agent goes away and comes
back, and a GPU's devices when the agent reports it unhealthy (a fault
injected into a simulated GPU: pushed within a second, both ways);
owner_uid=any lets a non-root process attach (gshare-simjob as nobody)
while allocations of owner_uid 0 stay closed to it; mode=space gives a
container its allocation's MPS pipe directory (environment and a
read-write mount; the agent runs tests/agent/fake_mps_control.sh); kubelet restart re-registers within a second; plugin restart
rebuilds its state from the agent and PodResources; N Allocates (default
1000) with flat RSS; gshare.io/gpu-mem (a container's memory limit set at
PreStartContainer whichever resource the kubelet allocated first, kept
across an agent restart; the default without it; refusals); clean
SIGTERM.  --valgrind runs the plugin under
valgrind for the whole run and fails on any definite leak or memory
error.  --bench measures Allocate latency (kubelet-side round trip, agent
included) and writes the figures to FILE.

Every process and file it starts is cleaned up on exit, pass or fail.
Waits poll with deadlines; no fixed sleeps decide an outcome.
"""

import argparse
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import kubelet_standin as ks  # noqa: E402

B = os.path.join(TOP, os.environ.get("B", "build"))
PLUGIN = os.path.join(B, "k8s-plugin", "gshare-device-plugin")
GSHARED = os.path.join(B, "node-agent", "gshared")
AGENTQ = os.path.join(B, "tests", "k8s", "dp_agentq")
GSHARECTL = os.path.join(B, "node-agent", "gsharectl")
SIMJOB = os.path.join(B, "runtime", "sim", "gshare-simjob")
FAKE_MPS = os.path.join(TOP, "tests", "agent", "fake_mps_control.sh")
GSACCT = os.path.join(B, "node-agent", "gsacct", "gsacct")
NODE = "testnode"

procs = []


def log(*a):
    print("k8s:", *a, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    log("ok:", what)


def wait(pred, timeout, what, step=0.02):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out after %.1f s: %s" % (timeout,
                                                                 what))
        time.sleep(step)


class Env:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="gshare-k8s-")
        # a non-root test process (owner_uid=any) must reach the socket
        os.chmod(self.tmp, 0o755)
        self.run = os.path.join(self.tmp, "run")
        self.dp = os.path.join(self.tmp, "device-plugins")
        self.pr = os.path.join(self.tmp, "pod-resources")
        for d in (self.run, self.dp, self.pr, os.path.join(self.tmp,
                                                           "state")):
            os.makedirs(d)
        self.sock = os.path.join(self.run, "gshared.sock")
        self.cfg = os.path.join(self.tmp, "gshare.yaml")
        with open(self.cfg, "w") as f:
            f.write("socket: %s\nstate_dir: %s/state\ngpus:\n"
                    "  simulated: 2\nlog: stderr\nmps_control: %s\n" %
                    (self.sock, self.tmp, FAKE_MPS))
        self.agent = None
        self.plugin = None
        self.plugin_log = None
        self.kubelet = ks.Kubelet(self.dp, os.path.join(self.pr,
                                                        "kubelet.sock"),
                                  log=log)

    # ---- agent ----
    def start_agent(self):
        self.agent = subprocess.Popen(
            [GSHARED, "-d", "-f", self.cfg],
            stdout=open(os.path.join(self.tmp, "agent.log"), "a"),
            stderr=subprocess.STDOUT)
        procs.append(self.agent)
        wait(lambda: self.agentq(quiet=True) is not None, 10,
             "agent answers on %s" % self.sock)

    def stop_agent(self):
        self.agent.send_signal(signal.SIGTERM)
        self.agent.wait(10)

    def agentq(self, quiet=False):
        r = subprocess.run([AGENTQ, self.sock], capture_output=True,
                           text=True)
        if r.returncode != 0:
            if not quiet:
                raise AssertionError("agent status: " + r.stderr)
            return None
        gpus, allocs = [], {}
        for line in r.stdout.splitlines():
            f = line.split()
            if f[0] == "gpu":
                gpus.append((int(f[1]), f[2], int(f[3])))
            elif f[0] == "alloc":
                allocs[int(f[1])] = dict(
                    gpu=int(f[2]), uuid=f[3], shares=int(f[4]),
                    state=f[5], cluster=f[6], node=f[7], ns=f[8],
                    pod=f[9], container=f[10], mem=int(f[11]))
        return gpus, allocs

    def ctl(self, *args):
        r = subprocess.run([GSHARECTL, "-s", self.sock] + list(args),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("gsharectl %s: %s" % (args, r.stderr))
        return r.stdout.strip()

    def open_allocs(self):
        return {i: a for i, a in self.agentq()[1].items()
                if a["state"] != "closed"}

    # ---- plugin ----
    def start_plugin(self, extra=()):
        cmd = [PLUGIN, "-v", "plugin_dir=" + self.dp,
               "podresources_socket=" + self.kubelet.podres_sock,
               "agent_socket=" + self.sock, "node_name=" + NODE,
               "tick=50ms", "agent_poll=100ms", "podresources_poll=200ms",
               "pod_grace=1s"] + list(extra)
        if self.args.valgrind:
            self.vg_log = os.path.join(self.tmp, "valgrind.%d.log" %
                                       len(procs))
            cmd = ["valgrind", "--leak-check=full",
                   "--errors-for-leak-kinds=definite",
                   "--error-exitcode=99", "--log-file=" + self.vg_log] + cmd
        self.plugin_log = os.path.join(self.tmp, "plugin.log")
        self.plugin = subprocess.Popen(
            cmd, stdout=open(self.plugin_log, "a"), stderr=subprocess.STDOUT)
        procs.append(self.plugin)

    def stop_plugin(self):
        t0 = time.monotonic()
        self.plugin.send_signal(signal.SIGTERM)
        rc = self.plugin.wait(30)
        took = time.monotonic() - t0
        if self.args.valgrind:
            text = open(self.vg_log).read()
            m = re.search(r"definitely lost: ([\d,]+) bytes", text)
            e = re.search(r"ERROR SUMMARY: (\d+) errors", text)
            check(rc == 0 and (m is None or m.group(1) == "0") and
                  e is not None and e.group(1) == "0",
                  "valgrind: no definite leaks, no memory errors "
                  "(rc %d, %s)" % (rc, (m.group(0) if m else
                                         "no leaks reported")))
        return rc, took

    def rss_kb(self):
        with open("/proc/%d/status" % self.plugin.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cleanup(self):
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
        # MPS stand-ins outlive the agent while they serve allocations
        mps = os.path.join(self.tmp, "state", "mps")
        for root, _, files in os.walk(mps):
            if not root.endswith("log"):
                continue
            pids = []
            for name in ("pid", "servers"):
                if name in files:
                    try:
                        pids += open(os.path.join(root, name)).read().split()
                    except OSError:
                        pass
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ValueError, OSError):
                    pass
        try:
            self.kubelet.stop()
        except Exception:
            pass
        if os.environ.get("KEEP_TMP"):
            log("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def expect_error(k, fn, code, pattern, what):
    try:
        fn()
    except ks.PluginError as e:
        check(e.code == code and re.search(pattern, e.details or ""),
              "%s -> %s %r" % (what, e.code.name, e.details))
        return
    raise AssertionError("%s was accepted" % what)


def run(args):
    env = Env(args)
    k = env.kubelet
    slow = 5 if args.valgrind else 1
    try:
        k.start()
        env.start_agent()
        gpus = env.agentq()[0]
        check(len(gpus) == 2, "agent runs 2 simulated GPUs")
        uuids = [g[1] for g in gpus]

        # The stand-in refuses what a kubelet refuses; the plugin refuses
        # to start with a resource name the kubelet would refuse.
        reg = ks.grpc.insecure_channel("unix:" + k.sock).unary_unary(
            "/v1beta1.Registration/Register",
            request_serializer=ks._ser,
            response_deserializer=ks.M["Empty"].FromString)
        for bad in (dict(version="v1alpha", resource_name="a.io/b"),
                    dict(version="v1beta1", resource_name="NoDomain")):
            try:
                reg(ks.M["RegisterRequest"](endpoint="x.sock", **bad),
                    timeout=5)
                raise AssertionError("stand-in accepted %r" % bad)
            except ks.grpc.RpcError as e:
                check(e.code() == ks.grpc.StatusCode.INVALID_ARGUMENT,
                      "stand-in refuses Register %r: %s" % (bad, e.details()))
        with k.lock:
            k.register_errors.clear()
        r = subprocess.run([PLUGIN, "resource=Gshare.io/gpu"],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "lowercase DNS" in r.stderr,
              "plugin refuses resource name Gshare.io/gpu: " +
              r.stderr.strip())

        r = subprocess.run([PLUGIN, "preload_source=lib/gate.so"],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "preload_source: must be an absolute"
              in r.stderr,
              "plugin refuses a relative preload_source: " +
              r.stderr.strip())

        # Registration: Register (validated), options, ListAndWatch.
        # The plugin copies the launch gate (preload_source) into the
        # agent socket directory, from where it is preloaded through the
        # socket directory's mount.
        gate_src = os.path.join(env.tmp, "gate-src.so")
        gate = os.path.join(env.run, "libgshare-gate.so")
        gate_bytes = b"\x7fELF launch gate stand-in %d\n" % os.getpid()
        with open(gate_src, "wb") as fh:
            fh.write(gate_bytes)

        def gate_installed():
            try:
                st = os.lstat(gate)
                with open(gate, "rb") as fh:
                    return (stat.S_ISREG(st.st_mode) and
                            stat.S_IMODE(st.st_mode) == 0o644 and
                            st.st_uid == os.geteuid() and
                            fh.read() == gate_bytes)
            except OSError:
                return False
        check(not os.path.exists(gate), "no launch gate in the socket "
              "directory before the plugin starts")
        env.start_plugin(["preload_source=" + gate_src])
        wait(gate_installed, 10 * slow, "launch gate installed")
        check([x for x in os.listdir(env.run) if "gate" in x] ==
              ["libgshare-gate.so"],
              "plugin start: preload_source copied into the socket "
              "directory as libgshare-gate.so (0644, same bytes, no "
              "temporary file left)")
        k.wait_for(lambda: k.registrations, 10 * slow, "registration")
        check(k.registrations[0][2] == "gshare.io/gpu-share" and
              not k.register_errors,
              "plugin registered gshare.io/gpu-share, version v1beta1")
        check(k.options.get_preferred_allocation_available,
              "GetDevicePluginOptions: preferred allocation available")

        # 100 devices per GPU, all healthy.
        k.wait_for(lambda: k.health_counts() == (200, 0), 10 * slow,
                   "200 healthy devices")
        want = {"%s::%d" % (u, n) for u in uuids for n in range(100)}
        check(set(k.devices) == want,
              "ListAndWatch: 100 devices <GPU-UUID>::<n> per GPU")

        # Packing: 30 then 80 then 60 then 20 on 2 GPUs of 100.
        def gpu_of(ids):
            s = {i.split("::")[0] for i in ids}
            assert len(s) == 1, ids
            return s.pop()
        a = k.admit("default", "pod-a", [("main", 30)])["main"]
        b = k.admit("default", "pod-b", [("main", 80)])["main"]
        check(gpu_of(a[0]) != gpu_of(b[0]),
              "80 shares go to the GPU that still has them")
        c = k.admit("default", "pod-c", [("main", 60)])["main"]
        check(gpu_of(c[0]) == gpu_of(a[0]),
              "60 shares pack next to the 30")
        d = k.admit("team", "pod-d", [("side", 15)])["side"]
        check(gpu_of(d[0]) == gpu_of(b[0]),
              "15 shares go where 20 are free, not 10")
        pref = k.preferred(k.free_ids(), [], 5)
        check(gpu_of(pref) == gpu_of(b[0]),
              "5 shares prefer the GPU with 5 free over 10 (best fit)")
        avail = k.free_ids()
        must = [i for i in avail if i.startswith(gpu_of(a[0]))][:2]
        pref = k.preferred(avail, must, 5)
        check(must[0] in pref and must[1] in pref and len(pref) == 5 and
              len({i.split("::")[0] for i in pref}) == 1,
              "GetPreferredAllocation honours must_include")

        # Environment, mount, and the agent's view.
        ids, envs, mounts = a
        alloc_id = int(envs["GSHARE_ALLOC"])
        check(envs["GSHARE_SOCKET"] == env.sock and
              envs["CUDA_VISIBLE_DEVICES"] == gpu_of(ids) and
              envs["NVIDIA_VISIBLE_DEVICES"] == gpu_of(ids),
              "Allocate env: GSHARE_SOCKET, GSHARE_ALLOC=%d, "
              "CUDA/NVIDIA_VISIBLE_DEVICES" % alloc_id)
        check(mounts == [(env.run, env.run, True)],
              "Allocate mounts the agent socket directory read-only")
        check(envs.get("LD_PRELOAD") ==
              os.path.join(env.run, "libgshare-gate.so"),
              "Allocate env: LD_PRELOAD is the launch gate in the mount")
        al = env.open_allocs()
        check(alloc_id in al and al[alloc_id]["shares"] == 30 and
              al[alloc_id]["uuid"] == gpu_of(ids),
              "agent shows allocation %d: 30 shares of %s" %
              (alloc_id, gpu_of(ids)[:12]))
        wait(lambda: env.open_allocs()[alloc_id]["pod"] == "pod-a", 5 * slow,
             "label from PodResources")
        al = env.open_allocs()[alloc_id]
        check((al["ns"], al["pod"], al["container"], al["cluster"],
               al["node"]) == ("default", "pod-a", "main", "kubernetes",
                               NODE),
              "allocation labelled default/pod-a/main from PodResources")

        # Bad requests: gRPC errors with readable messages.
        inv = ks.grpc.StatusCode.INVALID_ARGUMENT
        free = k.free_ids()
        g0 = [i for i in free if i.startswith(uuids[0])]
        g1 = [i for i in free if i.startswith(uuids[1])]
        expect_error(k, lambda: k.allocate(["GPU-deadbeef::3"]), inv,
                     r"GPU-deadbeef.*does not have", "unknown GPU ID")
        expect_error(k, lambda: k.allocate([uuids[0] + "::100"]), inv,
                     "out of range", "share number 100")
        expect_error(k, lambda: k.allocate(["garbage"]), inv,
                     "not <GPU-UUID>::<n>", "malformed ID")
        expect_error(k, lambda: k.allocate([]), inv,
                     "names no device IDs", "empty container request")
        expect_error(k, lambda: k.allocate_raw(ks.M["AllocateRequest"]()),
                     inv, "no container requests", "no containers")
        expect_error(k, lambda: k.allocate([g0[0], g1[0]]), inv,
                     "spans 2 GPUs", "IDs on two GPUs")
        expect_error(k, lambda: k.allocate([g0[0], g0[0]]), inv,
                     "named twice", "duplicate ID")
        expect_error(k, lambda: k.preferred(free, [], 0), inv,
                     "allocation_size", "preferred size 0")
        expect_error(k, lambda: k._call("Nope", ks.M["Empty"](),
                                        ks.M["Empty"]),
                     ks.grpc.StatusCode.UNIMPLEMENTED, "not implemented",
                     "unknown method")
        def garbage():
            try:
                k.channel.unary_unary(
                    "/v1beta1.DevicePlugin/Allocate",
                    request_serializer=lambda b: b,
                    response_deserializer=lambda b: b)(
                        b"\x0a\xff\xff\xff\x0f", timeout=5)
            except ks.grpc.RpcError as e:
                raise ks.PluginError(e.code(), e.details())
        expect_error(k, garbage, inv, "cannot decode",
                     "undecodable Allocate request")
        k._call("PreStartContainer", ks.M["PreStartContainerRequest"](
            devices_ids=a[0]), ks.M["Empty"])
        check(True, "PreStartContainer answered")
        # The agent refuses what does not fit (shares held outside
        # Kubernetes): RESOURCE_EXHAUSTED with the agent's reason.
        g0 = [i for i in k.free_ids() if i.startswith(uuids[0])]
        other = int(env.ctl("create", "--shares", str(len(g0) - 2),
                            "--gpu", "0", "--job", "4242"))
        expect_error(k, lambda: k.allocate(g0[:5]),
                     ks.grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "agent refused 5 shares",
                     "Allocate beyond the agent's free shares")
        env.ctl("close", str(other))
        check(env.open_allocs().get(other) is None and
              not [a for a in env.open_allocs().values()
                   if a["shares"] == 5],
              "refused Allocate left no allocation behind")

        # A drained GPU's devices turn Unhealthy, the other GPU's stay.
        env.ctl("drain", "1")
        k.wait_for(lambda: sum(1 for i, h in k.devices.items()
                               if h == "Unhealthy") == 100, 5 * slow,
                   "GPU 1 drained")
        with k.lock:
            bad = {i.split("::")[0] for i, h in k.devices.items()
                   if h == "Unhealthy"}
        check(bad == {uuids[1]}, "drain GPU 1: its 100 devices Unhealthy")
        env.ctl("undrain", "1")
        k.wait_for(lambda: k.health_counts() == (200, 0), 5 * slow,
                   "GPU 1 undrained")
        check(True, "undrain GPU 1: Healthy again")

        # An unhealthy GPU (fault injected into simulated GPU 0): its 100
        # devices are pushed Unhealthy within a second, and Healthy again
        # within a second of recovery.
        def unhealthy():
            with k.lock:
                return {i.split("::")[0] for i, h in k.devices.items()
                        if h == "Unhealthy"}
        t0 = time.monotonic()
        env.ctl("gpu-fail", "0")
        k.wait_for(lambda: k.health_counts() == (100, 100), 1.0 * slow,
                   "GPU 0's devices Unhealthy within a second")
        dt = time.monotonic() - t0
        check(unhealthy() == {uuids[0]},
              "GPU 0 fault: its 100 devices Unhealthy after %.2f s" % dt)
        with k.lock:
            g0 = sorted(i for i in k.devices if i.startswith(uuids[0]) and
                        i not in k.allocated)
        expect_error(k, lambda: k.allocate(g0[:1]), inv, "is unhealthy",
                     "Allocate on the unhealthy GPU")
        t0 = time.monotonic()
        env.ctl("gpu-ok", "0")
        k.wait_for(lambda: k.health_counts() == (200, 0), 1.0 * slow,
                   "GPU 0's devices Healthy within a second")
        check(True, "GPU 0 recovered: Healthy again after %.2f s" %
              (time.monotonic() - t0))

        # The gate removed from the socket directory: the next Allocate
        # installs it again and preloads it.
        os.unlink(gate)
        e = k.admit("default", "pod-e", [("main", 1)])["main"]
        check(int(e[1]["GSHARE_ALLOC"]) in env.open_allocs(),
              "plugin still serving after bad requests")
        check(gate_installed() and e[1].get("LD_PRELOAD") == gate,
              "gate removed from the socket directory: Allocate copies "
              "it back and preloads it")

        # Deleted pods: their allocations are closed (after the grace).
        k.delete("default", "pod-e")
        eid = int(e[1]["GSHARE_ALLOC"])
        wait(lambda: eid not in env.open_allocs(), 10 * slow,
             "allocation of deleted pod closed")
        check(True, "allocation %d of deleted pod-e closed" % eid)

        # Health: agent away -> Unhealthy; back -> Healthy.
        t0 = time.monotonic()
        env.stop_agent()
        k.wait_for(lambda: k.health_counts() == (0, 200), 5 * slow,
                   "all devices Unhealthy")
        check(True, "agent stopped: 200 devices Unhealthy after %.2f s" %
              (time.monotonic() - t0))
        expect_error(k, lambda: k.allocate(g0[:1]),
                     ks.grpc.StatusCode.UNAVAILABLE,
                     "agent at .* is unavailable",
                     "Allocate while the agent is down")
        t0 = time.monotonic()
        env.start_agent()
        k.wait_for(lambda: k.health_counts() == (200, 0), 5 * slow,
                   "all devices Healthy again")
        check(True, "agent back: 200 devices Healthy after %.2f s" %
              (time.monotonic() - t0))
        f = k.admit("default", "pod-f", [("main", 2)])["main"]
        check(int(f[1]["GSHARE_ALLOC"]) in env.open_allocs(),
              "Allocate works after the agent restart")

        # Kubelet restart: re-registration within a second.
        n = len(k.registrations)
        t0 = time.monotonic()
        k.restart()
        k.wait_for(lambda: len(k.registrations) > n, 5 * slow,
                   "re-registration")
        dt = k.registrations[-1][0] - t0
        check(dt <= 1.0 * slow, "kubelet restart: registered again after "
              "%.3f s (limit %.0f s)" % (dt, slow))
        k.wait_for(lambda: k.health_counts()[0] == 200, 5 * slow,
                   "devices after re-registration")

        # Plugin restart: state rebuilt from the agent and PodResources.
        rc, took = env.stop_plugin()
        check(rc == 0 and not [x for x in os.listdir(env.dp)
                              if x.startswith("gshare")],
              "SIGTERM: exit 0 after %.2f s, socket removed" % took)
        before = env.open_allocs()
        n = len(k.registrations)
        env.start_plugin(["allow_span=true", "owner_uid=any",
                          "preload=no"])
        k.wait_for(lambda: len(k.registrations) > n, 10 * slow,
                   "registration after plugin restart")
        k.wait_for(lambda: k.health_counts() == (200, 0), 10 * slow,
                   "200 healthy devices from the restarted plugin")
        fid = int(f[1]["GSHARE_ALLOC"])
        wait(lambda: env.open_allocs().get(fid, {}).get("pod") == "pod-f",
             5 * slow, "pod-f labelled after restart")
        k.delete("default", "pod-f")
        wait(lambda: fid not in env.open_allocs(), 10 * slow,
             "pod-f's allocation closed by the restarted plugin")
        check(set(before) - {fid} <= set(env.open_allocs()),
              "plugin restart kept the other allocations and closed "
              "pod-f's when it went")

        # allow_span: one allocation per GPU, all of them in the env.
        free = k.free_ids()
        span = [[i for i in free if i.startswith(u)][0] for u in uuids]
        envs, _ = k.allocate(span)
        check("LD_PRELOAD" not in envs,
              "preload=no: no LD_PRELOAD in the Allocate env")
        sids = [int(x) for x in envs["GSHARE_ALLOCS"].split(",")]
        al = env.open_allocs()
        check(len(sids) == 2 and envs["GSHARE_ALLOC"] == str(sids[0]) and
              envs["CUDA_VISIBLE_DEVICES"].count(",") == 1 and
              all(al[x]["shares"] == 1 for x in sids),
              "allow_span: a request over 2 GPUs gets one allocation on each")
        # owner_uid=any: a non-root process attaches to these; an
        # allocation of uid 0 stays closed to it.
        def as_nobody(alloc):
            return subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534",
                 "--clear-groups", SIMJOB, "-s", env.sock, "-a",
                 str(alloc), "-d", "0.05"], capture_output=True, text=True)
        plain = int(env.ctl("create", "--shares", "1", "--gpu", "1"))
        st = json.loads(env.ctl("status", "--json"))
        anyuid = {a["id"]: a["any_uid"] for a in st["allocations"]}
        check(anyuid.get(sids[0]) is True and anyuid.get(plain) is False,
              "owner_uid=any: the agent shows the allocations as any-uid")
        r = as_nobody(sids[0])
        check(r.returncode == 0 and "event=done" in r.stdout,
              "owner_uid=any: uid 65534 attaches to allocation %d (%s)" %
              (sids[0], (r.stdout + r.stderr).strip()[:60]))
        r = as_nobody(plain)
        check(r.returncode == 1 and
              ("no allocation %d" % plain) in r.stderr,
              "uid 0's allocation: uid 65534 may not attach: " +
              r.stderr.strip())
        env.ctl("close", str(plain))
        with k.lock:
            k.pods[("default", "pod-s")] = {"main": span}
            for x in span:
                k.allocated[x] = ("default", "pod-s", "main")
        k.delete("default", "pod-s")

        # Many Allocates: RSS stays flat, allocations do not pile up.
        for pod in ("pod-a", "pod-b", "pod-c"):
            k.delete("default", pod)
        k.delete("team", "pod-d")
        lat = []
        rss = []
        for i in range(args.allocs):
            n = 1 + i % 5
            avail = k.free_ids()
            ids = k.preferred(avail, [], n)
            t0 = time.perf_counter()
            envs, _ = k.allocate(ids)
            lat.append(time.perf_counter() - t0)
            with k.lock:
                for x in ids:
                    k.allocated[x] = ("bulk", "p%d" % i, "c")
                k.pods[("bulk", "p%d" % i)] = {"c": ids}
            if i >= 3:
                k.delete("bulk", "p%d" % (i - 3))
            if i in (args.allocs // 5, args.allocs - 1):
                rss.append(env.rss_kb())
        lat.sort()
        p50 = lat[len(lat) // 2] * 1000
        p99 = lat[int(len(lat) * 0.99) - 1] * 1000
        log("Allocate latency over %d calls: p50 %.3f ms, p99 %.3f ms" %
            (len(lat), p50, p99))
        if not args.valgrind:
            check(rss[1] - rss[0] < 2048,
                  "%d Allocates: RSS %d kB -> %d kB (flat, < 2 MB growth)" %
                  (args.allocs, rss[0], rss[1]))
        for i in range(max(0, args.allocs - 3), args.allocs):
            k.delete("bulk", "p%d" % i)
        wait(lambda: len(env.open_allocs()) == 0, 10 * slow,
             "every allocation closed once every pod is gone")
        check(True, "all %d allocations closed once their pods were gone" %
              args.allocs)
        # Init containers: the kubelet hands their devices on to the
        # pod's later containers within one admission; their allocations
        # must survive it (the init container has not even started).
        pi = k.admit("default", "pod-i", [("main", 20), ("side", 5)],
                     init=[("setup", 20), ("warm", 20)])
        pj = k.admit("default", "pod-j", [("main", 15), ("aux", 3)],
                     init=[("setup", 10)])
        aid = {(p, c): int(r[1]["GSHARE_ALLOC"])
               for p, cs in (("i", pi), ("j", pj)) for c, r in cs.items()}
        check(set(pi["main"][0]) == set(pi["setup"][0]) and
              set(pj["setup"][0]) < set(pj["main"][0]),
              "stand-in: app containers got the init containers' devices")
        openall = env.open_allocs()
        check(all(x in openall for x in aid.values()),
              "every container's allocation is open after admission, init "
              "containers' included: %s" % sorted(set(aid.values())))
        check(aid[("i", "setup")] == aid[("i", "warm")] == aid[("i", "main")]
              and aid[("i", "side")] != aid[("i", "main")] and
              openall[aid[("i", "main")]]["shares"] == 20,
              "the same device IDs share one allocation (init, init, app)")
        check(len({aid[("j", c)] for c in ("setup", "main", "aux")}) == 3
              and openall[aid[("j", "setup")]]["shares"] == 10 and
              openall[aid[("j", "main")]]["shares"] == 15,
              "other IDs get their own allocation; the init container's "
              "stays")
        wait(lambda: env.open_allocs().get(aid[("j", "main")], {}).get(
            "pod") == "pod-j", 5 * slow, "pod-j labelled")
        wait(lambda: env.open_allocs().get(aid[("j", "setup")], {}).get(
            "pod") == "pod-j", 5 * slow, "pod-j's init allocation labelled")
        r = subprocess.run([SIMJOB, "-s", env.sock, "-a",
                            str(aid[("j", "setup")]), "-d", "0.05"],
                           capture_output=True, text=True)
        check(r.returncode == 0 and "event=done" in r.stdout,
              "after PodResources polls the init container still attaches "
              "to allocation %d" % aid[("j", "setup")])
        k.delete("default", "pod-i")
        k.delete("default", "pod-j")
        wait(lambda: not set(aid.values()) & set(env.open_allocs()),
             10 * slow, "pod-i and pod-j's allocations closed")
        check(True, "deleting the pods closes all their allocations")

        # A pod deleted between two PodResources polls and its devices
        # handed at once to a new pod, on a full GPU where the kubelet
        # asks no GetPreferredAllocation (it has no choice): the new pod
        # gets the shares, the old allocation is closed.
        env.ctl("drain", "1")
        k.wait_for(lambda: k.health_counts() == (100, 100), 5 * slow,
                   "GPU 1 drained")
        pp = k.admit("default", "pod-p", [("main", 100)])["main"]
        ppid = int(pp[1]["GSHARE_ALLOC"])
        wait(lambda: env.open_allocs().get(ppid, {}).get("pod") == "pod-p",
             5 * slow, "pod-p seen in PodResources")
        k.delete("default", "pod-p")
        pq = k.admit("default", "pod-q", [("main", 100)])["main"]
        pqid = int(pq[1]["GSHARE_ALLOC"])
        al = env.open_allocs()
        check(set(pq[0]) == set(pp[0]) and ppid not in al and
              al.get(pqid, {}).get("shares") == 100,
              "a full GPU's devices handed from a deleted pod to a new one "
              "at once: allocation %d closed, %d has the 100 shares" %
              (ppid, pqid))
        k.delete("default", "pod-q")
        env.ctl("undrain", "1")
        wait(lambda: pqid not in env.open_allocs(), 10 * slow,
             "pod-q's allocation closed")
        k.wait_for(lambda: k.health_counts() == (200, 0), 5 * slow,
                   "GPU 1 undrained")

        # The agent restarts, or goes away, between two of the plugin's
        # agent polls (agent_poll=60s here): the plugin's connection is
        # stale.  An Allocate replaces it; with no agent it says the agent
        # is unavailable, not that it refused.
        rc, _ = env.stop_plugin()
        n = len(k.registrations)
        env.start_plugin(["agent_poll=60s"])
        k.wait_for(lambda: len(k.registrations) > n, 10 * slow,
                   "registration (agent_poll=60s)")
        k.wait_for(lambda: k.health_counts() == (200, 0), 10 * slow,
                   "200 healthy devices (agent_poll=60s)")
        env.stop_agent()
        env.start_agent()
        pr = k.admit("default", "pod-r", [("main", 3)])["main"]
        check(int(pr[1]["GSHARE_ALLOC"]) in env.open_allocs(),
              "Allocate right after an agent restart the plugin has not "
              "polled yet: the stale connection is replaced")
        env.stop_agent()
        free = k.free_ids()
        expect_error(k, lambda: k.allocate(free[:1]),
                     ks.grpc.StatusCode.UNAVAILABLE,
                     "agent at .* is unavailable",
                     "Allocate after the agent went away between two polls")
        env.start_agent()

        # Space mode: the container is a client of the MPS server the
        # agent runs for its allocation's uid (docs/space.md).
        rc, _ = env.stop_plugin()
        n = len(k.registrations)
        env.start_plugin(["mode=space", "owner_uid=1000"])
        k.wait_for(lambda: len(k.registrations) > n, 10 * slow,
                   "registration (mode=space)")
        k.wait_for(lambda: k.health_counts() == (200, 0), 10 * slow,
                   "200 healthy devices (mode=space)")
        pm = k.admit("default", "pod-m", [("main", 10)])["main"]
        mid = int(pm[1]["GSHARE_ALLOC"])
        gpu = [g[0] for g in env.agentq()[0] if g[1] == gpu_of(pm[0])][0]
        pipe = os.path.join(env.tmp, "state", "mps", str(gpu), "1000",
                            "pipe")
        # no thread cap: with the agent's default space_unmodified:
        # turns a job without libgshare takes turns uncapped
        check(pm[1].get("CUDA_MPS_PIPE_DIRECTORY") == pipe and
              "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in pm[1],
              "mode=space: CUDA_MPS_PIPE_DIRECTORY=%s, no "
              "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" % pipe)
        check((pipe, pipe, False) in pm[2] and
              (env.run, env.run, True) in pm[2] and len(pm[2]) == 2,
              "mode=space: the pipe directory is mounted read-write")
        wait(lambda: os.path.exists(os.path.join(pipe, "control")),
             5 * slow, "the MPS stand-in serves uid 1000 on GPU %d" % gpu)
        k.delete("default", "pod-m")
        wait(lambda: mid not in env.open_allocs(), 10 * slow,
             "pod-m's space allocation closed")

        # gshare.io/gpu-mem: a second registration, one device per GiB;
        # its PreStartContainer sets the limit of the container's share
        # allocation, whichever resource the kubelet allocated first.
        GIB = 1 << 30
        log("free share devices:", len(k.free_ids()))
        k.wait_for(lambda: k.mem_registrations and k.mem_options, 10 * slow,
                   "gpu-mem registration")
        k.wait_for(lambda: len(k.mem_devices) == 160, 5 * slow,
                   "160 memory devices (2 simulated GPUs of 80 GiB)")
        check(k.mem_registrations[0][2] == "gshare.io/gpu-mem" and
              k.mem_options.pre_start_required and
              not k.mem_options.get_preferred_allocation_available and
              all(h == "Healthy" for h in k.mem_devices.values()),
              "plugin registered gshare.io/gpu-mem (PreStartContainer "
              "required), 80 healthy devices per GPU")
        for order in (False, True):
            pod = "pod-mem%d" % order
            e = k.admit_mem("default", pod, "main", 30, 10, mem_first=order)
            mid = int(e["GSHARE_ALLOC"])
            check(e.get("GSHARE_MEM_GIB") == "10" and
                  env.open_allocs()[mid]["mem"] == 10 * GIB,
                  "30 shares + 10 GiB (%s first): allocation %d has a "
                  "10 GiB limit" % ("gpu-mem" if order else "gpu-share",
                                    mid))
            if not order:
                # the asked limit is in the agent's table: a restart
                # settles the same one
                env.stop_agent()
                env.start_agent()
                check(env.open_allocs()[mid]["mem"] == 10 * GIB,
                      "allocation %d: 10 GiB after an agent restart" % mid)
                k.wait_for(lambda: all(h == "Healthy" for h in
                                       k.mem_devices.values()) and
                           k.health_counts()[1] == 0, 10 * slow,
                           "devices healthy after the agent restart")
            k.delete("default", pod)
            wait(lambda: mid not in env.open_allocs(), 10 * slow,
                 "%s closed" % pod)
        e = k.admit_mem("default", "pod-mem-def", "main", 30, 0)
        mid = int(e["GSHARE_ALLOC"])
        check("GSHARE_MEM_GIB" not in e and
              env.open_allocs()[mid]["mem"] == 23756 * (1 << 20),
              "30 shares without gpu-mem: the default limit (23756M)")
        k.delete("default", "pod-mem-def")
        expect_error(k, lambda: k.admit_mem("default", "pod-mem-big", "main",
                                            30, 79),
                     ks.grpc.StatusCode.INVALID_ARGUMENT,
                     r"default/pod-mem-big container main: 79 GiB of GPU "
                     r"memory refused: .*79G exceeds",
                     "30 shares + 79 GiB (more than a GPU offers)")
        big = [a for a in env.open_allocs().values()
               if a["pod"] in ("-", "pod-mem-big") and a["shares"] == 30]
        check(big and all(a["mem"] == 23756 * (1 << 20) for a in big),
              "the refused limit changed nothing")
        k.delete("default", "pod-mem-big")
        expect_error(k, lambda: k.admit_mem("default", "pod-mem-only",
                                            "main", 0, 4),
                     ks.grpc.StatusCode.INVALID_ARGUMENT,
                     "asks 4 GiB of gshare.io/gpu-mem without "
                     "gshare.io/gpu-share",
                     "gpu-mem without gpu-share")
        k.delete("default", "pod-mem-only")
        mdev = sorted(k.mem_devices)
        expect_error(k, lambda: k.mem_allocate_raw([mdev[0], mdev[0]]),
                     ks.grpc.StatusCode.INVALID_ARGUMENT, "twice",
                     "gpu-mem Allocate with a device ID twice")
        for bad in (uuids[0] + "::3", uuids[0] + "::mem80",
                    uuids[0] + "::mem-1", "GPU-nope::mem1"):
            expect_error(k, lambda: k.mem_allocate_raw([bad]),
                         ks.grpc.StatusCode.INVALID_ARGUMENT,
                         "unknown device ID",
                         "gpu-mem Allocate of %r" % bad)
        expect_error(k, lambda: k._mem_call(
            "PreStartContainer", ks.M["PreStartContainerRequest"](
                devices_ids=[mdev[5]]), ks.M["Empty"]),
                     ks.grpc.StatusCode.INVALID_ARGUMENT,
                     "PodResources shows no container",
                     "PreStartContainer of IDs no container holds")
        k.admit_mem("default", "pod-mem-sub", "main", 10, 4)
        sub = k.mem_pods[("default", "pod-mem-sub")]["main"][:2]
        expect_error(k, lambda: k._mem_call(
            "PreStartContainer", ks.M["PreStartContainerRequest"](
                devices_ids=sub), ks.M["Empty"]),
                     ks.grpc.StatusCode.INVALID_ARGUMENT,
                     "no container holding exactly these 2 device IDs "
                     r"\(default/pod-mem-sub container main holds 4;",
                     "PreStartContainer of part of a container's IDs (an "
                     "init container's, handed on)")
        k.delete("default", "pod-mem-sub")

        if args.bench:
            # Plugin side: request decoded to response built, agent round
            # trip included (logged by the plugin at -v).
            us = sorted([int(m) for m in re.findall(
                r"Allocate: 1 container\(s\) answered in (\d+) us",
                open(env.plugin_log).read())][-args.allocs:])
            with open(args.bench, "w") as f:
                f.write("allocs %d p50_ms %.3f p99_ms %.3f max_ms %.3f "
                        "plugin_p50_ms %.3f plugin_p99_ms %.3f "
                        "plugin_max_ms %.3f\n" %
                        (len(lat), p50, p99, lat[-1] * 1000,
                         us[len(us) // 2] / 1000.0,
                         us[int(len(us) * 0.99) - 1] / 1000.0,
                         us[-1] / 1000.0))

        rc, took = env.stop_plugin()
        check(rc == 0, "SIGTERM: plugin exits 0 after %.2f s" % took)
        env.stop_agent()
        # Usage reports name pods as namespace/pod/container.
        r = subprocess.run([GSACCT, "--store", os.path.join(
            env.tmp, "state", "usage.db"), "-P", "-n", "-S", "now-1hours",
            "-o", "JobID,GPU,Share,State"], capture_output=True, text=True)
        rows = r.stdout.split()
        check(r.returncode == 0 and any(x.startswith("default/pod-a/main|")
                                        for x in rows) and
              any(x.startswith("team/pod-d/side|") for x in rows),
              "gsacct reports the pods: %s" % ", ".join(
                  x for x in rows if "pod-" in x)[:200])
        log("PASS")
        return 0
    except Exception:
        for name in ("plugin.log", "agent.log"):
            p = os.path.join(env.tmp, name)
            if os.path.exists(p):
                log("---- last lines of", name)
                sys.stdout.write("".join(open(p).readlines()[-40:]))
        raise
    finally:
        env.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--valgrind", action="store_true")
    ap.add_argument("--allocs", type=int, default=1000)
    ap.add_argument("--bench")
    args = ap.parse_args()
    for p in (PLUGIN, GSHARED, AGENTQ, GSHARECTL, GSACCT):
        if not os.access(p, os.X_OK):
            log("FAIL: %s not built" % p)
            return 1
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
