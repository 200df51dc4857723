// Validates Grafana dashboards against Grafana's own dashboard schema, offline.
//
//   NODE_PATH=/opt/baton-node-tools/node_modules node schema_check.js generate OUT.json
//   NODE_PATH=/opt/baton-node-tools/node_modules node schema_check.js validate SCHEMA.json DASHBOARD.json
//
// generate: writes a draft-07 JSON Schema generated from the TypeScript type `Dashboard` of
// @grafana/schema (raw/dashboard/x/types.gen.d.ts, which Grafana generates from its CUE
// dashboard kind) by ts-json-schema-generator, both pinned in tools/node/package.json.
// Objects are closed (additionalProperties: false), so a misspelt key is an error; panel
// `options`, `fieldConfig.defaults.custom` and `targets` are open (plugin-specific) in the
// types themselves.
//
// One extension, because the types model only the built-in Grafana annotation: an
// annotation query may carry the Prometheus data source's annotation fields (expr, step,
// titleFormat, textFormat, tagKeys, useValueForTime, typed as Grafana's Prometheus plugin
// reads them). Nothing else is relaxed.
//
// validate: exit 0 if the dashboard is valid; else prints one line per error
// ("FAIL DASHBOARD /json/pointer: message {params}") and exits 1.
"use strict";

const fs = require("fs");
const path = require("path");

const PROMETHEUS_ANNOTATION_FIELDS = {
  expr: { type: "string", description: "PromQL; each series' samples become events." },
  step: { type: "string", description: "Query step, a Grafana interval such as 1m." },
  titleFormat: { type: "string", description: "Event title; {{label}} expands." },
  textFormat: { type: "string", description: "Event text; {{label}} expands." },
  tagKeys: { type: "string", description: "Comma-separated labels that become tags." },
  useValueForTime: { type: "boolean", description: "The sample value is the event time (ms)." },
};

function generate(out) {
  const tsj = require("ts-json-schema-generator");
  const pkg = path.dirname(require.resolve("@grafana/schema/package.json"));
  const types = path.join(pkg, "dist/types/raw/dashboard/x/types.gen.d.ts");
  const schema = tsj
    .createGenerator({ path: types, type: "Dashboard", skipTypeCheck: true, expose: "export", topRef: true })
    .createSchema("Dashboard");
  const annotation = schema.definitions.AnnotationQuery;
  if (!annotation || annotation.additionalProperties !== false) {
    throw new Error("@grafana/schema's AnnotationQuery changed shape; revisit the extension");
  }
  for (const [key, def] of Object.entries(PROMETHEUS_ANNOTATION_FIELDS)) {
    if (key in annotation.properties) throw new Error("AnnotationQuery already has " + key);
    annotation.properties[key] = def;
  }
  fs.writeFileSync(out, JSON.stringify(schema, null, 1));
  console.log("schema: %d definitions from %s", Object.keys(schema.definitions).length, types);
}

function validate(schemaPath, dashboardPath) {
  const Ajv = require("ajv");
  const ajv = new Ajv({ allErrors: true, strict: false });
  const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
  const check = ajv.compile(schema);
  const dashboard = JSON.parse(fs.readFileSync(dashboardPath, "utf8"));
  if (check(dashboard)) {
    console.log("PASS %s: valid against Grafana's dashboard schema", dashboardPath);
    return 0;
  }
  for (const e of relevant(check.errors, dashboard, ajv, schema)) {
    console.log("FAIL %s %s: %s %s", dashboardPath, e.instancePath || "/", e.message, JSON.stringify(e.params));
  }
  return 1;
}

// A top-level panel is `Panel | RowPanel` (anyOf), and ajv reports why it fails both. For
// panels, report the errors of the branch the panel's `type` selects instead.
function relevant(errors, dashboard, ajv, schema) {
  const branch = {
    Panel: ajv.compile({ ...schema, $ref: "#/definitions/Panel" }),
    RowPanel: ajv.compile({ ...schema, $ref: "#/definitions/RowPanel" }),
  };
  const out = errors.filter((e) => !/^\/panels\/\d+(\/|$)/.test(e.instancePath));
  (Array.isArray(dashboard.panels) ? dashboard.panels : []).forEach((panel, i) => {
    const check = panel != null && panel.type === "row" ? branch.RowPanel : branch.Panel;
    if (check(panel)) return;
    for (const e of check.errors) out.push({ ...e, instancePath: "/panels/" + i + e.instancePath });
  });
  return out;
}

function main(argv) {
  if (argv[0] === "generate" && argv.length === 2) {
    generate(argv[1]);
    return 0;
  }
  if (argv[0] === "validate" && argv.length === 3) return validate(argv[1], argv[2]);
  console.error("usage: schema_check.js generate OUT.json | validate SCHEMA.json DASHBOARD.json");
  return 2;
}

process.exitCode = main(process.argv.slice(2));
