#!/usr/bin/env python3
"""Check an unpacked OCI image layout against the manifests in crds/.

Usage: check_image.py LAYOUT ROOTFS IMAGE VERSION DAEMONSET
LAYOUT is the unpacked archive, ROOTFS the image's root file system
(unpacked independently, by umoci).  Prints one line per check and, last,
the commands to run inside ROOTFS (one per line, JSON arrays): each
container's command with -n after the program (print the configuration
and exit).  Exit 1 on the first failure.
"""
import gzip
import hashlib
import json
import os
import stat
import sys

import yaml


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}")


def blob(layout, desc, what):
    d = desc.get("digest", "")
    if not d.startswith("sha256:"):
        fail(f"{what}: digest {d!r}")
    path = os.path.join(layout, "blobs", "sha256", d[7:])
    if not os.path.isfile(path):
        fail(f"{what}: blob {d} missing")
    data = open(path, "rb").read()
    if hashlib.sha256(data).hexdigest() != d[7:]:
        fail(f"{what}: blob {d} does not match its digest")
    if len(data) != desc.get("size"):
        fail(f"{what}: size {desc.get('size')} != {len(data)}")
    return data


def in_root(rootfs, path, want_exec=False, want_dir=False):
    """Resolve path inside rootfs (symbolic links relative to it)."""
    p = path
    for _ in range(40):
        full = os.path.join(rootfs, p.lstrip("/"))
        if os.path.islink(full):
            t = os.readlink(full)
            p = t if t.startswith("/") else os.path.join(os.path.dirname(p), t)
            continue
        break
    else:
        fail(f"{path}: too many links")
    if want_dir:
        return os.path.isdir(full)
    if not os.path.isfile(full):
        return False
    if want_exec:
        st = os.stat(full)
        if not st.st_mode & stat.S_IXUSR:
            return False
        with open(full, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return False
    return True


def main():
    layout, rootfs, image, version, dsfile = sys.argv[1:6]
    ref = f"{image}:{version}"

    if json.load(open(os.path.join(layout, "oci-layout"))) != {"imageLayoutVersion": "1.0.0"}:
        fail("oci-layout")
    index = json.load(open(os.path.join(layout, "index.json")))
    mans = index.get("manifests", [])
    if index.get("schemaVersion") != 2 or len(mans) != 1:
        fail("index.json: want schemaVersion 2 and one manifest")
    ann = mans[0].get("annotations", {})
    if ann.get("org.opencontainers.image.ref.name") != version:
        fail(f"index.json: ref.name {ann.get('org.opencontainers.image.ref.name')!r}, want {version}")
    if ann.get("io.containerd.image.name") != ref:
        fail(f"index.json: io.containerd.image.name {ann.get('io.containerd.image.name')!r}, want {ref}")
    man = json.loads(blob(layout, mans[0], "manifest"))
    if man.get("mediaType") != "application/vnd.oci.image.manifest.v1+json":
        fail("manifest mediaType")
    cfg = json.loads(blob(layout, man["config"], "config"))
    diff_ids = cfg["rootfs"]["diff_ids"]
    if len(diff_ids) != len(man["layers"]):
        fail("config: diff_ids and layers differ in number")
    for i, layer in enumerate(man["layers"]):
        data = gzip.decompress(blob(layout, layer, f"layer {i}"))
        if "sha256:" + hashlib.sha256(data).hexdigest() != diff_ids[i]:
            fail(f"layer {i}: diff_id does not match")
    docker = json.load(open(os.path.join(layout, "manifest.json")))
    if docker[0]["RepoTags"] != [ref] or \
       docker[0]["Config"] != "blobs/sha256/" + man["config"]["digest"][7:]:
        fail("manifest.json (docker load) does not name the same image")
    ok(f"layout: index, manifest, config, {len(diff_ids)} layer(s) match their digests; tag {ref}")

    c = cfg["config"]
    if cfg.get("os") != "linux":
        fail("config: os")
    user = c.get("User", "")
    uid = int(user.split(":")[0]) if user else 0
    ep = c.get("Entrypoint") or []
    if not ep or not in_root(rootfs, ep[0], want_exec=True):
        fail(f"Entrypoint {ep}: not an executable in the image")
    ok(f"config: Entrypoint {ep} + Cmd {c.get('Cmd')}, User {user!r}")

    ds = yaml.safe_load(open(dsfile))
    spec = ds["spec"]["template"]["spec"]
    runs = []
    for ctr in spec["containers"]:
        name = ctr["name"]
        if ctr.get("image") != ref:
            fail(f"daemonset {name}: image {ctr.get('image')!r}, want {ref}")
        cmd = ctr.get("command") or ep
        argv = list(cmd) + list(ctr.get("args") or ([] if ctr.get("command") else c.get("Cmd") or []))
        if not in_root(rootfs, argv[0], want_exec=True):
            fail(f"daemonset {name}: {argv[0]} is not an executable in the image")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            ex = (ctr.get(probe) or {}).get("exec")
            if ex and not in_root(rootfs, ex["command"][0], want_exec=True):
                fail(f"daemonset {name}: {probe} {ex['command'][0]} not in the image")
        sc = ctr.get("securityContext") or {}
        if sc.get("runAsUser", uid) != uid:
            fail(f"daemonset {name}: runAsUser {sc.get('runAsUser')} but the image's User is {user!r}")
        for m in ctr.get("volumeMounts") or []:
            if not in_root(rootfs, m["mountPath"], want_dir=True):
                fail(f"daemonset {name}: mount point {m['mountPath']} is not a directory in the image")
        ok(f"daemonset {name}: image {ref}, {argv[0]} in the image, uid {uid}, mount points")
        runs.append([argv[0], "-n"] + argv[1:])
    for r in runs:
        print("RUN " + json.dumps(r))


if __name__ == "__main__":
    main()
