// validate.js — offline validation of gshare's Kubernetes manifests.
//
//   node validate.js [--crd CRD.yaml] [--dump-config DIR] FILE...
//
// Every YAML document is checked:
//   - built-in kinds with the validators kubernetes-models bundles
//     (generated from the Kubernetes OpenAPI schemas);
//   - custom resources (gshare.io) against the openAPIV3Schema of their
//     CustomResourceDefinition, compiled with the ajv kubernetes-models
//     itself uses;
//   - consistency the schemas cannot see: volume mounts name declared
//     volumes, selectors match the template, container names are unique,
//     gshare.io/gpu-share requests are whole shares 1..100 with equal
//     requests and limits, CRD names agree and their schemas compile and
//     are structural.
// Prints one line per document and exits 1 when any document fails.
// --dump-config DIR writes the data of ConfigMap gshare-config there, so
// the caller can check it with the programs' own -n.
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");
const modelsDir = path.dirname(require.resolve("kubernetes-models/package.json"));
const validateDir = path.dirname(require.resolve("@kubernetes-models/validate",
  { paths: [modelsDir] }));
const Ajv = require(require.resolve("ajv", { paths: [validateDir] })).default;

const SHARE = "gshare.io/gpu-share";
let crdFiles = [];
let dumpDir = null;
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--crd") crdFiles.push(argv[++i]);
  else if (argv[i] === "--dump-config") dumpDir = argv[++i];
  else files.push(argv[i]);
}

function loadDocs(file) {
  return yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d != null);
}

// CRDs known to this run: from --crd files and from the files checked.
const crds = new Map(); // "group/version/Kind" -> compiled schema
function addCrd(doc, where) {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  for (const v of doc.spec.versions || []) {
    const schema = v.schema && v.schema.openAPIV3Schema;
    if (!schema) throw new Error(`${where}: version ${v.name} has no openAPIV3Schema`);
    structural(schema, `${where}: ${v.name}`);
    const fn = ajv.compile(schema);
    crds.set(`${doc.spec.group}/${v.name}/${doc.spec.names.kind}`,
      { fn, schema });
  }
}

// Structural schema rules the API server enforces that ajv does not.
function structural(s, where) {
  if (s.properties && s.type !== "object")
    throw new Error(`${where}: a schema with properties must be type: object`);
  if (s.items && s.type !== "array")
    throw new Error(`${where}: a schema with items must be type: array`);
  if (!s.type && !s["x-kubernetes-int-or-string"] &&
      !s["x-kubernetes-preserve-unknown-fields"])
    throw new Error(`${where}: every schema node needs a type`);
  for (const [k, v] of Object.entries(s.properties || {}))
    structural(v, `${where}.${k}`);
  if (s.items) structural(s.items, `${where}[]`);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    structural(s.additionalProperties, `${where}{}`);
}

// Fields the API server would prune (kubectl --validate=strict refuses
// them): properties a schema does not declare.
function unknownFields(s, v, where, out) {
  if (!s || v === null || typeof v !== "object" ||
      s["x-kubernetes-preserve-unknown-fields"]) return;
  if (Array.isArray(v)) {
    v.forEach((x, i) => unknownFields(s.items, x, `${where}/${i}`, out));
    return;
  }
  if (!s.properties) return;
  for (const [k, x] of Object.entries(v)) {
    if (!(k in s.properties)) {
      if (where !== "") out.push(`${where}/${k} unknown field`);
    } else unknownFields(s.properties[k], x, `${where}/${k}`, out);
  }
}

function modelFor(doc) {
  const av = String(doc.apiVersion || "");
  const mod = av.includes("/") ? `kubernetes-models/${av}` : `kubernetes-models/${av}`;
  let m;
  try {
    m = require(path.join(modelsDir, mod.replace(/^kubernetes-models\//, "")));
  } catch (e) {
    return null;
  }
  return m[doc.kind] || null;
}

function podSpecOf(doc) {
  if (doc.kind === "Pod") return doc.spec;
  if (doc.spec && doc.spec.template) return doc.spec.template.spec;
  return null;
}

function lint(doc) {
  const errs = [];
  const spec = podSpecOf(doc);
  if (spec) {
    const vols = new Set((spec.volumes || []).map((v) => v.name));
    const names = new Set();
    for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
      if (names.has(c.name)) errs.push(`container name ${c.name} used twice`);
      names.add(c.name);
      for (const m of c.volumeMounts || [])
        if (!vols.has(m.name))
          errs.push(`container ${c.name} mounts undeclared volume ${m.name}`);
      const r = c.resources || {};
      const lim = (r.limits || {})[SHARE], req = (r.requests || {})[SHARE];
      for (const [what, v] of [["limits", lim], ["requests", req]]) {
        if (v === undefined) continue;
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 100)
          errs.push(`container ${c.name}: ${SHARE} ${what} ${v} is not a whole number of shares 1..100`);
      }
      if (req !== undefined && String(req) !== String(lim))
        errs.push(`container ${c.name}: ${SHARE} requests must equal limits`);
    }
  }
  if (doc.spec && doc.spec.selector && doc.spec.selector.matchLabels && doc.spec.template) {
    const labels = (doc.spec.template.metadata || {}).labels || {};
    for (const [k, v] of Object.entries(doc.spec.selector.matchLabels))
      if (labels[k] !== v) errs.push(`selector ${k}=${v} does not match the pod template labels`);
  }
  if (doc.kind === "CustomResourceDefinition") {
    const s = doc.spec;
    if (doc.metadata.name !== `${s.names.plural}.${s.group}`)
      errs.push(`name must be ${s.names.plural}.${s.group}`);
    if ((s.versions || []).filter((v) => v.storage).length !== 1)
      errs.push("exactly one version must be the storage version");
  }
  return errs;
}

const docs = [];
for (const f of [...crdFiles, ...files]) {
  try {
    for (const d of loadDocs(f)) docs.push({ f, d, crdOnly: crdFiles.includes(f) && !files.includes(f) });
  } catch (e) {
    docs.push({ f, err: `YAML: ${e.message}` });
  }
}
for (const x of docs) {
  if (x.d && x.d.kind === "CustomResourceDefinition") {
    try { addCrd(x.d, x.f); } catch (e) { x.err = e.message; }
  }
}

let failed = 0;
for (const x of docs) {
  if (x.crdOnly && !x.err) continue;
  const d = x.d || {};
  const name = `${x.f}: ${d.kind || "?"} ${(d.metadata && d.metadata.name) || "?"}`;
  const errs = [];
  if (x.err) errs.push(x.err);
  else if (!d.apiVersion || !d.kind) errs.push("apiVersion and kind are required");
  else if (String(d.apiVersion).startsWith("gshare.io/")) {
    const v = crds.get(`${d.apiVersion}/${d.kind}`);
    if (!v) errs.push(`no CustomResourceDefinition for ${d.apiVersion} ${d.kind}`);
    else if (!v.fn(d)) errs.push(...v.fn.errors.map((e) => `${e.instancePath || "/"} ${e.message}${e.params && e.params.additionalProperty ? ` (${e.params.additionalProperty})` : ""}${e.params && e.params.allowedValues ? ` (${e.params.allowedValues.join(", ")})` : ""}`));
    if (v) unknownFields(v.schema, d, "", errs);
  } else {
    const Model = modelFor(d);
    if (!Model) errs.push(`unknown kind ${d.apiVersion} ${d.kind}`);
    else {
      try { new Model(d).validate(); } catch (e) { errs.push(e.message); }
    }
  }
  if (!errs.length) errs.push(...lint(d));
  if (errs.length) {
    failed++;
    console.log(`FAIL ${name}: ${errs.join("; ")}`);
  } else {
    console.log(`ok   ${name}`);
  }
  if (dumpDir && d.kind === "ConfigMap" && d.metadata && d.metadata.name === "gshare-config") {
    fs.mkdirSync(dumpDir, { recursive: true });
    for (const [k, v] of Object.entries(d.data || {}))
      fs.writeFileSync(path.join(dumpDir, k), v);
  }
}
if (!docs.length) { console.log("no documents"); failed++; }
process.exit(failed ? 1 : 0);
