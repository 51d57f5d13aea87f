"""A kubelet stand-in for testing gshare-device-plugin.

It behaves as the kubelet's device manager does toward a device plugin:
  - serves /v1beta1.Registration/Register on <dir>/kubelet.sock; validates
    the version ("v1beta1"), the resource name (domain/name) and the
    endpoint; while handling Register it dials the plugin, calls
    GetDevicePluginOptions, starts ListAndWatch, and only then answers;
  - keeps the newest ListAndWatch device list (every message is the full
    list; its length is the capacity);
  - admits pods one container at a time, init containers first, as the
    kubelet's device manager does: a container takes devices from the
    pod's reuse pool first (the devices of its init containers, which
    have finished before any later container starts), then asks
    GetPreferredAllocation over the pool's picks (must_include) and the
    healthy unallocated devices, then calls Allocate with one container;
    an init container's devices join the pool, an app container's leave
    it, and every device stays the pod's until the pod is deleted;
  - serves /v1.PodResourcesLister/List from what it allocated (app
    containers only, like a kubelet without sidecar init containers);
  - restart(): stops serving, deletes every socket in the directory (as
    a starting kubelet does) and serves again.

Messages come from k8s-plugin/kubelet.proto, parsed here (the file uses
plain proto3 scalars, repeated fields and message references only) into
descriptors built with google.protobuf's descriptor API: Debian ships no
grpc_tools/protoc for Python.  Uses /usr/bin/python3 with python3-grpcio
and python3-protobuf.
"""

import os
import re
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "k8s-plugin", "kubelet.proto")

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
}


def load_messages(path=PROTO):
    """Parse the messages-only proto file into message classes."""
    text = re.sub(r"//[^\n]*", "", open(path).read())
    pkg = re.search(r"\bpackage\s+([\w.]+)\s*;", text).group(1)
    fdp = descriptor_pb2.FileDescriptorProto(
        name="gshare_kubelet_standin.proto", package=pkg, syntax="proto3")
    for name, body in re.findall(r"message\s+(\w+)\s*\{([^}]*)\}", text):
        m = fdp.message_type.add(name=name)
        for rep, typ, fname, num in re.findall(
                r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;", body):
            f = m.field.add(name=fname, number=int(num), json_name=fname)
            f.label = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                       if rep else
                       descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
            if typ in _SCALARS:
                f.type = _SCALARS[typ]
            else:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                f.type_name = "." + pkg + "." + typ
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    classes = {}
    for m in fdp.message_type:
        desc = pool.FindMessageTypeByName(pkg + "." + m.name)
        if hasattr(message_factory, "GetMessageClass"):
            classes[m.name] = message_factory.GetMessageClass(desc)
        else:
            classes[m.name] = message_factory.MessageFactory(
                pool).GetPrototype(desc)
    return classes


M = load_messages()
_ser = lambda m: m.SerializeToString()  # noqa: E731

RESOURCE_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class PluginError(Exception):
    """A gRPC call to the plugin failed: .code and .details."""

    def __init__(self, code, details):
        super().__init__("%s: %s" % (code, details))
        self.code = code
        self.details = details


class Kubelet:
    def __init__(self, plugin_dir, podres_sock, log=print):
        self.dir = plugin_dir
        self.sock = os.path.join(plugin_dir, "kubelet.sock")
        self.podres_sock = podres_sock
        self.log = log
        self.lock = threading.Condition()
        self.server = None
        self.podres_server = None
        self.registrations = []      # (time, endpoint, resource)
        self.register_errors = []
        self.devices = {}            # id -> health, newest list
        self.updates = 0             # ListAndWatch messages received
        self.update_times = []
        self.endpoint = None
        self.options = None
        self.channel = None
        self.allocated = {}          # device id -> (ns, pod, ctr)
        self.pods = {}               # (ns, pod) -> {ctr: [ids]}
        self.init_pods = {}          # the same for init containers
        self.stream_thread = None
        # the memory resource (gshare.io/gpu-mem), registered apart
        self.mem_registrations = []
        self.mem_channel = None
        self.mem_options = None
        self.mem_devices = {}
        self.mem_allocated = {}
        self.mem_pods = {}           # (ns, pod) -> {ctr: [ids]}

    # ---- serving ----
    def start(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("v1beta1.Registration", {
                "Register": grpc.unary_unary_rpc_method_handler(
                    self._register,
                    request_deserializer=M["RegisterRequest"].FromString,
                    response_serializer=_ser),
            }),))
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()
        if self.podres_sock:
            self.podres_server = grpc.server(futures.ThreadPoolExecutor(2))
            self.podres_server.add_generic_rpc_handlers((
                grpc.method_handlers_generic_handler(
                    "v1.PodResourcesLister", {
                        "List": grpc.unary_unary_rpc_method_handler(
                            self._podres_list,
                            request_deserializer=M["Empty"].FromString,
                            response_serializer=_ser),
                    }),))
            self.podres_server.add_insecure_port("unix:" + self.podres_sock)
            self.podres_server.start()

    def stop(self):
        for s in (self.server, self.podres_server):
            if s is not None:
                s.stop(0).wait()
        self.server = self.podres_server = None
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def restart(self):
        """Like a kubelet restart: stop, delete every socket, serve."""
        self.stop()
        with self.lock:
            self.endpoint = None
        for name in os.listdir(self.dir):
            p = os.path.join(self.dir, name)
            if not os.path.isdir(p):
                os.unlink(p)
        self.start()

    def _register(self, req, ctx):
        why = None
        if req.version != "v1beta1":
            why = "unsupported API version %r" % req.version
        elif not RESOURCE_RE.match(req.resource_name) or \
                req.resource_name.split("/")[0].endswith("kubernetes.io"):
            why = "invalid resource name %r" % req.resource_name
        elif not req.endpoint or "/" in req.endpoint or not os.path.exists(
                os.path.join(self.dir, req.endpoint)):
            why = "bad endpoint %r" % req.endpoint
        if why:
            with self.lock:
                self.register_errors.append(why)
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, why)
        ch = grpc.insecure_channel(
            "unix:" + os.path.join(self.dir, req.endpoint))
        try:
            opts = ch.unary_unary(
                "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                request_serializer=_ser,
                response_deserializer=M["DevicePluginOptions"].FromString)(
                    M["Empty"](), timeout=5)
        except grpc.RpcError as e:
            ch.close()
            ctx.abort(grpc.StatusCode.UNAVAILABLE,
                      "GetDevicePluginOptions failed: %s" % e.details())
        stream = ch.unary_stream(
            "/v1beta1.DevicePlugin/ListAndWatch", request_serializer=_ser,
            response_deserializer=M["ListAndWatchResponse"].FromString)(
                M["Empty"]())
        if req.resource_name == self.mem_resource:
            with self.lock:
                old = self.mem_channel
                self.mem_channel = ch
                self.mem_options = opts
            if old is not None:
                old.close()
            threading.Thread(target=self._mem_watch, args=(stream, ch),
                             daemon=True).start()
            with self.lock:
                self.mem_registrations.append(
                    (time.monotonic(), req.endpoint, req.resource_name))
                self.lock.notify_all()
            return M["Empty"]()
        with self.lock:
            old = self.channel
            self.channel = ch
            self.endpoint = req.endpoint
            self.options = opts
        if old is not None:
            old.close()
        t = threading.Thread(target=self._watch, args=(stream, ch),
                             daemon=True)
        t.start()
        self.stream_thread = t
        with self.lock:
            self.registrations.append(
                (time.monotonic(), req.endpoint, req.resource_name))
            self.lock.notify_all()
        return M["Empty"]()

    def _watch(self, stream, ch):
        try:
            for resp in stream:
                with self.lock:
                    if self.channel is not ch:
                        break
                    self.devices = {d.ID: d.health for d in resp.devices}
                    self.updates += 1
                    self.update_times.append(time.monotonic())
                    self.lock.notify_all()
        except grpc.RpcError:
            pass
        with self.lock:
            if self.channel is ch:
                # The plugin is gone: its devices are no longer usable.
                self.devices = {}
                self.lock.notify_all()

    def _mem_watch(self, stream, ch):
        try:
            for resp in stream:
                with self.lock:
                    if self.mem_channel is not ch:
                        break
                    self.mem_devices = {d.ID: d.health
                                        for d in resp.devices}
                    self.lock.notify_all()
        except grpc.RpcError:
            pass

    def _podres_list(self, req, ctx):
        out = M["ListPodResourcesResponse"]()
        with self.lock:
            for (ns, pod) in sorted(set(self.pods) | set(self.mem_pods)):
                ctrs = self.pods.get((ns, pod), {})
                p = out.pod_resources.add(name=pod, namespace=ns)
                mem = self.mem_pods.get((ns, pod), {})
                for cname in list(ctrs) + [c for c in mem
                                           if c not in ctrs]:
                    ids = ctrs.get(cname)
                    c = p.containers.add(name=cname)
                    if ids:
                        c.devices.add(resource_name=self.resource,
                                      device_ids=ids)
                    if mem.get(cname):
                        c.devices.add(resource_name=self.mem_resource,
                                      device_ids=mem[cname])
                    # A CPU-only container shows up too, without devices.
        return out

    resource = "gshare.io/gpu-share"
    mem_resource = "gshare.io/gpu-mem"

    # ---- waiting ----
    def wait_for(self, pred, timeout, what):
        end = time.monotonic() + timeout
        with self.lock:
            while not pred():
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out after %.1f s waiting "
                                         "for %s" % (timeout, what))
                self.lock.wait(min(left, 0.05))

    def health_counts(self):
        with self.lock:
            h = sum(1 for v in self.devices.values() if v == "Healthy")
            return h, len(self.devices) - h

    # ---- calls to the plugin ----
    def _call(self, method, req, resp_cls, timeout=10, mem=False):
        with self.lock:
            ch = self.mem_channel if mem else self.channel
        if ch is None:
            raise AssertionError("no %splugin registered" %
                                 ("memory " if mem else ""))
        try:
            return ch.unary_unary(
                "/v1beta1.DevicePlugin/" + method, request_serializer=_ser,
                response_deserializer=resp_cls.FromString)(
                    req, timeout=timeout)
        except grpc.RpcError as e:
            raise PluginError(e.code(), e.details())

    def preferred(self, avail, must, size):
        req = M["PreferredAllocationRequest"]()
        req.container_requests.add(available_deviceIDs=avail,
                                   must_include_deviceIDs=must,
                                   allocation_size=size)
        resp = self._call("GetPreferredAllocation", req,
                          M["PreferredAllocationResponse"])
        assert len(resp.container_responses) == 1, resp
        return list(resp.container_responses[0].deviceIDs)

    def allocate(self, ids):
        """One container per call, one container response back."""
        req = M["AllocateRequest"]()
        req.container_requests.add(devices_ids=ids)
        resp = self._call("Allocate", req, M["AllocateResponse"])
        assert len(resp.container_responses) == 1, resp
        r = resp.container_responses[0]
        return ({e.key: e.value for e in r.envs},
                [(m.container_path, m.host_path, m.read_only)
                 for m in r.mounts])

    def allocate_raw(self, req):
        return self._call("Allocate", req, M["AllocateResponse"])

    def free_ids(self):
        with self.lock:
            return sorted(i for i, h in self.devices.items()
                          if h == "Healthy" and i not in self.allocated)

    def _pick(self, n, reuse):
        """The kubelet's devicesToAllocate: the reuse pool first (in
        sorted order), then a preferred allocation that must include
        what the pool gave."""
        with self.lock:
            healthy = {i for i, h in self.devices.items() if h == "Healthy"}
        got = [i for i in sorted(reuse) if i in healthy][:n]
        if len(got) == n:
            return got
        avail = [i for i in self.free_ids() if i not in got]
        if len(avail) + len(got) < n:
            raise AssertionError("only %d free devices" % len(avail))
        if len(avail) == n - len(got):
            # the kubelet asks for a preference only when it has a choice
            return got + avail
        pref = self.preferred(sorted(set(avail) | set(got)), got, n)
        assert len(pref) == n and set(got) <= set(pref), pref
        return got + [i for i in pref if i not in got]

    def admit(self, ns, pod, containers, init=()):
        """Admit a pod: containers and init are [(name, shares)].  Returns
        {name: (ids, envs, mounts)}.  Raises PluginError on refusal."""
        out = {}
        reuse = set()
        for is_init, (cname, n) in ([(True, c) for c in init] +
                                    [(False, c) for c in containers]):
            ids = self._pick(n, reuse)
            envs, mounts = self.allocate(ids)
            with self.lock:
                for i in ids:
                    self.allocated[i] = (ns, pod, cname)
                if is_init:
                    reuse |= set(ids)
                    self.init_pods.setdefault((ns, pod), {})[cname] = ids
                else:
                    reuse -= set(ids)
                    self.pods.setdefault((ns, pod), {})[cname] = ids
            out[cname] = (ids, envs, mounts)
        return out

    def _mem_call(self, method, req, resp_cls, timeout=10):
        return self._call(method, req, resp_cls, timeout, mem=True)

    def mem_allocate_raw(self, ids):
        req = M["AllocateRequest"]()
        req.container_requests.add(devices_ids=ids)
        return self._mem_call("Allocate", req, M["AllocateResponse"])

    def admit_mem(self, ns, pod, cname, shares, gib, mem_first=False):
        """Admit a one-container pod asking shares of gshare.io/gpu-share
        (0: none) and gib of gshare.io/gpu-mem, as the kubelet does: one
        Allocate per resource in the order given (the kubelet's is a map
        walk), each resource's devices recorded for the container as its
        Allocate returns, then PreStartContainer for the resources that
        asked for it.  Returns the merged environment; raises
        PluginError."""
        envs = {}

        def share():
            ids = self._pick(shares, set())
            e, _ = self.allocate(ids)
            with self.lock:
                for i in ids:
                    self.allocated[i] = (ns, pod, cname)
                self.pods.setdefault((ns, pod), {})[cname] = ids
            for key, v in e.items():
                envs.setdefault(key, v)

        def mem():
            with self.lock:
                free = sorted(i for i, h in self.mem_devices.items()
                              if h == "Healthy" and
                              i not in self.mem_allocated)
            if len(free) < gib:
                raise AssertionError("only %d free memory devices" %
                                     len(free))
            ids = free[:gib]
            resp = self.mem_allocate_raw(ids)
            with self.lock:
                for i in ids:
                    self.mem_allocated[i] = (ns, pod, cname)
                self.mem_pods.setdefault((ns, pod), {})[cname] = ids
            for e in resp.container_responses[0].envs:
                envs.setdefault(e.key, e.value)
            return ids

        mids = None
        for step in ((mem, share) if mem_first else (share, mem)):
            if (step is share and shares == 0) or (step is mem and
                                                   gib == 0):
                continue
            r = step()
            if step is mem:
                mids = r
        if mids and self.mem_options is not None and \
                self.mem_options.pre_start_required:
            req = M["PreStartContainerRequest"](devices_ids=mids)
            self._mem_call("PreStartContainer", req, M["Empty"])
        return envs

    def delete(self, ns, pod):
        with self.lock:
            for ids in self.mem_pods.pop((ns, pod), {}).values():
                for i in ids:
                    self.mem_allocated.pop(i, None)
            ctrs = self.pods.pop((ns, pod), {})
            ctrs.update(self.init_pods.pop((ns, pod), {}))
            for ids in ctrs.values():
                for i in ids:
                    self.allocated.pop(i, None)
