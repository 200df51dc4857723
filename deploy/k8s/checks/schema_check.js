// Validates rendered Kubernetes manifests against the Kubernetes API schemas
// (kubernetes-models, ~Kubernetes 1.32) and the CRDs of the Prometheus Operator and
// cert-manager (@kubernetes-models/*), and rejects unknown fields, which the API server
// drops silently or refuses (strict field validation) and which the models' schemas alone
// do not flag.
//
//   NODE_PATH=/opt/baton-node-tools/node_modules node schema_check.js RENDERED.yaml...
//
// Unknown fields are found by watching what the schema validator reads: it reads every
// property its schema declares; a field it never reads in an object it inspected is not in
// the schema. Objects whose schema has free-form maps (labels, resources) are enumerated
// by the validator and so accepted whole; objects the validator never looks into
// (free-form fields) are not checked further.
// Exit status: 0 when every object is valid, 1 otherwise (one line per problem).
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');

// apiVersion group -> the package (directory of per-version modules) that models it.
const PACKAGES = {
  'monitoring.coreos.com': '@kubernetes-models/prometheus-operator',
  'cert-manager.io': '@kubernetes-models/cert-manager',
};

function modelFor(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const pkg = PACKAGES[group] || 'kubernetes-models';
  // Resolve the package directory, then require the kind's module by path (the packages'
  // export maps do not list every module).
  let dir;
  try {
    dir = path.dirname(require.resolve(pkg + '/package.json'));
  } catch (e) {
    dir = path.join(path.dirname(require.resolve(pkg)), '..');
  }
  const file = path.join(dir, apiVersion, kind + '.js');
  if (!fs.existsSync(file)) return null;
  return require(file)[kind];
}

// Wraps `root` so that reads of each object's properties are recorded.
function tracker(root) {
  const records = new Map();
  function wrap(obj, where) {
    if (obj === null || typeof obj !== 'object') return obj;
    if (records.has(obj)) return records.get(obj).proxy;
    const rec = {where, obj, read: new Set(), enumerated: false, touched: false};
    rec.proxy = new Proxy(obj, {
      get(target, key) {
        rec.touched = true;
        if (typeof key !== 'string') return target[key];
        rec.read.add(key);
        const value = target[key];
        return Object.prototype.hasOwnProperty.call(target, key) ? wrap(value, where + '/' + key)
                                                                  : value;
      },
      has(target, key) {
        rec.touched = true;
        rec.read.add(key);
        return key in target;
      },
      ownKeys(target) {
        rec.enumerated = true;
        return Reflect.ownKeys(target);
      },
    });
    records.set(obj, rec);
    return rec.proxy;
  }
  return {proxy: wrap(root, ''), records};
}

function unknownFields(records) {
  const out = [];
  for (const rec of records.values()) {
    if (!rec.touched || rec.enumerated || Array.isArray(rec.obj)) continue;
    for (const key of Object.keys(rec.obj)) {
      if (!rec.read.has(key)) out.push(rec.where + '/' + key);
    }
  }
  return out.sort();
}

// Returns the problems of one manifest object, as strings.
function checkObject(obj) {
  if (!obj || typeof obj !== 'object' || !obj.apiVersion || !obj.kind) {
    return ['not a Kubernetes object (no apiVersion/kind)'];
  }
  const Model = modelFor(obj.apiVersion, obj.kind);
  if (!Model) return [`unknown kind ${obj.apiVersion} ${obj.kind}`];
  const problems = [];
  const {proxy, records} = tracker(obj);
  try {
    Model.prototype.validate.call(proxy);
  } catch (e) {
    problems.push(e.message);
  }
  for (const field of unknownFields(records)) problems.push(`unknown field ${field}`);
  return problems;
}

function main(files) {
  if (files.length === 0) {
    console.error('usage: schema_check.js RENDERED.yaml...');
    return 2;
  }
  let objects = 0;
  let failures = 0;
  for (const file of files) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
    for (const doc of docs) {
      if (doc.errors.length) {
        failures++;
        console.log(`${file}: YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
        continue;
      }
      const obj = doc.toJS();
      if (obj === null) continue;
      objects++;
      const name = `${obj.kind || '?'}/${(obj.metadata && obj.metadata.name) || '?'}`;
      for (const problem of checkObject(obj)) {
        failures++;
        console.log(`${file}: ${name}: ${problem}`);
      }
    }
  }
  if (failures) {
    console.log(`FAIL: ${failures} problem(s) in ${objects} object(s)`);
    return 1;
  }
  console.log(`PASS: ${objects} object(s) valid, no unknown fields`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
