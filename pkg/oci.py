#!/usr/bin/env python3
"""Write an OCI image archive (image layout v1 in a tar) with one layer.

The archive holds oci-layout, index.json, blobs/sha256/* (image manifest,
config, gzip layer) and, for `docker load` of older Docker versions, the
Docker archive's manifest.json naming the same blobs.  The index carries
the reference both as org.opencontainers.image.ref.name (the tag, as
podman and skopeo read it) and io.containerd.image.name (the full name,
as `ctr import` reads it).  Times come from SOURCE_DATE_EPOCH, so the
same root file system gives the same archive.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile

ENTRYPOINT = ["/usr/sbin/gshared"]
CMD = ["-d", "-f", "/etc/gshare/gshare.yaml"]
USER = "0:0"
ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rootfs", required=True, help="root file system tar")
    ap.add_argument("--name", required=True, help="repository, e.g. localhost/gshare/gshare")
    ap.add_argument("--version", required=True, help="tag")
    ap.add_argument("--arch", required=True, help="Debian architecture")
    ap.add_argument("--out", required=True, help="archive to write")
    a = ap.parse_args()

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = __import__("datetime").datetime.fromtimestamp(
        epoch, __import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    oci_arch = {"amd64": "amd64", "arm64": "arm64", "ppc64el": "ppc64le",
                "s390x": "s390x"}.get(a.arch)
    if oci_arch is None:
        sys.exit(f"oci.py: architecture {a.arch} not supported")

    tmp = tempfile.mkdtemp()
    try:
        blobs = {}  # digest -> path

        # the layer: gzip of the root file system tar (no name, mtime 0)
        layer = os.path.join(tmp, "layer")
        diff = hashlib.sha256()
        with open(a.rootfs, "rb") as src, open(layer, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                               mtime=0, compresslevel=6) as gz:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    diff.update(chunk)
                    gz.write(chunk)
        layer_digest = "sha256:" + sha256_file(layer)
        blobs[layer_digest] = layer

        def add_json(obj):
            data = json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n"
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            path = os.path.join(tmp, digest[7:])
            with open(path, "wb") as f:
                f.write(data)
            blobs[digest] = path
            return digest, len(data)

        labels = {
            "org.opencontainers.image.title": "gshare",
            "org.opencontainers.image.description":
                "gshare node components: gshared, gshare-device-plugin, "
                "the launch gate library",
            "org.opencontainers.image.version": a.version,
        }
        config = {
            "created": created,
            "architecture": oci_arch,
            "os": "linux",
            "config": {
                "User": USER,
                "Env": ENV,
                "Entrypoint": ENTRYPOINT,
                "Cmd": CMD,
                "WorkingDir": "/",
                "Labels": labels,
            },
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff.hexdigest()]},
            "history": [{"created": created,
                         "created_by": "pkg/mkimage.sh (mmdebstrap, make deb)"}],
        }
        cfg_digest, cfg_size = add_json(config)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": cfg_digest, "size": cfg_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_digest,
                        "size": os.path.getsize(layer)}],
            "annotations": labels,
        }
        man_digest, man_size = add_json(manifest)
        ref = f"{a.name}:{a.version}"
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": man_digest, "size": man_size,
                "platform": {"architecture": oci_arch, "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": a.version,
                                "io.containerd.image.name": ref},
            }],
        }
        docker = [{"Config": "blobs/sha256/" + cfg_digest[7:],
                   "RepoTags": [ref],
                   "Layers": ["blobs/sha256/" + layer_digest[7:]]}]

        def info(name, size, mode=0o644, kind=tarfile.REGTYPE):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.type, ti.mtime = size, mode, kind, epoch
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            return ti

        part = a.out + ".part"
        with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as t:
            for d in ("blobs", "blobs/sha256"):
                t.addfile(info(d, 0, 0o755, tarfile.DIRTYPE))
            for name, obj in (("oci-layout", {"imageLayoutVersion": "1.0.0"}),
                              ("index.json", index),
                              ("manifest.json", docker)):
                data = json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n"
                t.addfile(info(name, len(data)), io.BytesIO(data))
            for digest in sorted(blobs):
                path = blobs[digest]
                with open(path, "rb") as f:
                    t.addfile(info("blobs/sha256/" + digest[7:],
                                   os.path.getsize(path)), f)
        os.replace(part, a.out)
        print(f"image: {a.out}: {ref}, manifest {man_digest}, "
              f"layer {os.path.getsize(layer) // 1024} KiB")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
