// Validates Grafana dashboards against Grafana's own published schema, offline.
//
//   NODE_PATH=/opt/baton-node-tools/node_modules node schema_check.js SCHEMA_DIR DASHBOARD.json
//
// The schemas are draft-07 JSON Schemas that ts-json-schema-generator generates from the
// TypeScript types of @grafana/schema (which Grafana generates from its CUE kinds), both
// pinned in tools/node/package.json. They are written to SCHEMA_DIR; one already there is
// reused (the test passes a fresh $TEST_TMPDIR, so each run generates them once):
//   dashboard.json                  type Dashboard of raw/dashboard/x/types.gen.d.ts;
//   panel.TYPE.Options.json         type Options of raw/composable/TYPE/panelcfg, for each
//                                   panel type used (TYPE without dashes: state-timeline
//                                   -> statetimeline), checking the panel's `options`;
//   panel.TYPE.FieldConfig.json     its FieldConfig, checking fieldConfig.defaults.custom,
//                                   or null where the plugin has none (stat).
// Objects are closed (additionalProperties: false), so a misspelt key is an error, and
// properties the types require are required: Grafana fills them from its defaults when it
// loads a dashboard, and writes them all when it saves one. A panel type without a
// published schema is an error.
//
// One extension, because the dashboard types model only the built-in Grafana annotation:
// an annotation query may carry the Prometheus data source's annotation fields (expr,
// step, titleFormat, textFormat, tagKeys, useValueForTime, typed as Grafana's Prometheus
// plugin reads them). Nothing else is relaxed.
//
// Exit 0 and "PASS DASHBOARD ..." if the dashboard is valid; else one line per error,
// "FAIL DASHBOARD /json/pointer: message {params}", and exit 1.
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

const SCHEMA_PACKAGE = path.dirname(require.resolve("@grafana/schema/package.json"));

// The JSON Schema of `type` in the .d.ts file `types` (relative to the package).
function generate(types, type) {
  const tsj = require("ts-json-schema-generator");
  return tsj
    .createGenerator({ path: path.join(SCHEMA_PACKAGE, types), type, skipTypeCheck: true, expose: "export", topRef: true })
    .createSchema(type);
}

function dashboardSchema() {
  const schema = generate("dist/types/raw/dashboard/x/types.gen.d.ts", "Dashboard");
  const annotation = schema.definitions.AnnotationQuery;
  if (!annotation || annotation.additionalProperties !== false) {
    throw new Error("@grafana/schema's AnnotationQuery changed shape; revisit the extension");
  }
  for (const [key, def] of Object.entries(PROMETHEUS_ANNOTATION_FIELDS)) {
    if (key in annotation.properties) throw new Error("AnnotationQuery already has " + key);
    annotation.properties[key] = def;
  }
  return schema;
}

// The .d.ts of a panel plugin's types (relative to the package), or null if it has none.
function panelTypes(panelType) {
  const types = "dist/types/raw/composable/" + panelType.replace(/-/g, "") + "/panelcfg/x/types.gen.d.ts";
  return fs.existsSync(path.join(SCHEMA_PACKAGE, types)) ? types : null;
}

// The panel plugin's schema of `type` ("Options" or "FieldConfig"), or null if the plugin
// does not declare that type.
function panelSchema(types, type) {
  // Only the plugin's own declarations: `FieldConfig` would otherwise resolve to an
  // imported type of the same name.
  const declared = new RegExp("^export interface " + type + "\\b", "m");
  if (!declared.test(fs.readFileSync(path.join(SCHEMA_PACKAGE, types), "utf8"))) return null;
  return generate(types, type);
}

// Loads SCHEMA_DIR/name, generating it with make() first if absent (null is stored too).
function cached(dir, name, make) {
  const file = path.join(dir, name);
  if (!fs.existsSync(file)) fs.writeFileSync(file, JSON.stringify(make(), null, 1));
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

function panelsOf(dashboard) {
  const out = [];
  (Array.isArray(dashboard.panels) ? dashboard.panels : []).forEach((p, i) => {
    out.push(["/panels/" + i, p]);
    if (p && Array.isArray(p.panels)) p.panels.forEach((q, j) => out.push(["/panels/" + i + "/panels/" + j, q]));
  });
  return out;
}

function validate(dir, dashboardPath) {
  const Ajv = require("ajv");
  const ajv = new Ajv({ allErrors: true, strict: false });
  const dashboard = JSON.parse(fs.readFileSync(dashboardPath, "utf8"));
  const schema = cached(dir, "dashboard.json", dashboardSchema);
  const check = ajv.compile(schema);
  const errors = check(dashboard) ? [] : relevant(check.errors, dashboard, ajv, schema);

  const plugin = {};  // "TYPE.Options" -> compiled validator, or null if not declared
  const pluginCheck = (types, panelType, type) => {
    const key = panelType + "." + type;
    if (!(key in plugin)) {
      const s = cached(dir, "panel." + key + ".json", () => panelSchema(types, type));
      plugin[key] = s === null ? null : ajv.compile(s);
    }
    return plugin[key];
  };
  for (const [at, panel] of panelsOf(dashboard)) {
    if (!panel || typeof panel.type !== "string" || panel.type === "row") continue;
    const types = panelTypes(panel.type);
    if (types === null) {
      errors.push({ instancePath: at + "/type", message: "no published schema for panel type " + panel.type, params: {} });
      continue;
    }
    const options = pluginCheck(types, panel.type, "Options");
    if (options && !options(panel.options || {})) {
      for (const e of options.errors) errors.push({ ...e, instancePath: at + "/options" + e.instancePath });
    }
    const custom = pluginCheck(types, panel.type, "FieldConfig");
    const value = ((panel.fieldConfig || {}).defaults || {}).custom;
    if (custom && value !== undefined && !custom(value)) {
      for (const e of custom.errors) errors.push({ ...e, instancePath: at + "/fieldConfig/defaults/custom" + e.instancePath });
    }
  }

  if (errors.length === 0) {
    console.log("PASS %s: valid against Grafana's dashboard and panel schemas", dashboardPath);
    return 0;
  }
  for (const e of errors) {
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
  if (argv.length !== 2) {
    console.error("usage: schema_check.js SCHEMA_DIR DASHBOARD.json");
    return 2;
  }
  fs.mkdirSync(argv[0], { recursive: true });
  return validate(argv[0], argv[1]);
}

process.exitCode = main(process.argv.slice(2));
