// Lints a Dockerfile: dockerfile-utils' validator, then Baton's image policy.
//
// Usage: NODE_PATH=/opt/baton-node-tools/node_modules \
//          node dockerfile_lint.js DOCKERFILE [--binaries=NAME,NAME...]
// Prints one line per problem, `FAIL <rule> <file>:<line>: <message>`, and exits 1 if there
// is any (0 otherwise; 2 on a usage error). Rules:
//   validator        dockerfile-utils' validate() reported a diagnostic (any severity)
//   from-pinned      a FROM that names an image (not an earlier stage) must be `${ARG}`,
//                    that ARG declared before the first FROM with a default of the form
//                    name:tag@sha256:<64 hex>
//   no-latest        no image reference uses the `latest` tag
//   user             the final stage's USER is numeric uid:gid, neither of them 0
//   entrypoint-tini  the final stage's ENTRYPOINT is exec form ["/usr/bin/tini", "--", PROG...]
//   oci-labels       the final stage labels org.opencontainers.image.{source,title,
//                    description,licenses,version,revision}; version, revision, source and
//                    licenses come from ARGs of that stage
//   apt              a RUN that runs `apt-get install` passes --no-install-recommends and
//                    removes /var/lib/apt/lists; `apt install` (the interactive CLI) is refused
//   binaries         each NAME in --binaries is copied into /usr/local/bin/ in the final stage
'use strict';

const fs = require('fs');
const {validate} = require('dockerfile-utils');

// [registry[:port]/]path:tag@sha256:<64 hex>
const DIGEST_REF = new RegExp('^[a-z0-9][a-z0-9._/-]*(:[0-9]+)?(/[a-z0-9._-]+)*' +
                              ':[A-Za-z0-9_][A-Za-z0-9._-]{0,127}@sha256:[0-9a-f]{64}$');
const OCI_LABELS = ['source', 'title', 'description', 'licenses', 'version', 'revision'];
const ARG_VALUED_LABELS = ['source', 'licenses', 'version', 'revision'];

// Splits a Dockerfile into instructions: {keyword, args, line} with continuation lines
// joined and comment lines (also those inside a continuation) dropped. `line` is 1-based.
function parseInstructions(text) {
  const out = [];
  let current = null;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#') || (current === null && trimmed === '')) return;
    const continued = /\\\s*$/.test(raw);
    const body = continued ? raw.replace(/\\\s*$/, '') : raw;
    if (current === null) {
      const m = body.trim().match(/^(\S+)\s*([\s\S]*)$/);
      current = {keyword: m[1].toUpperCase(), args: m[2], line: i + 1};
    } else {
      current.args += ' ' + body.trim();
    }
    if (!continued) {
      current.args = current.args.trim();
      out.push(current);
      current = null;
    }
  });
  if (current !== null) out.push(current);
  return out;
}

// Splits `KEY=VALUE KEY2="V 2"` (LABEL/ENV/ARG syntax) into [key, value] pairs.
function parsePairs(args) {
  const pairs = [];
  const re = /([^\s=]+)=("((?:[^"\\]|\\.)*)"|(\S*))/g;
  let m;
  while ((m = re.exec(args)) !== null) {
    pairs.push([m[1], m[3] !== undefined ? m[3] : m[4]]);
  }
  return pairs;
}

function lint(file, text, binaries) {
  const problems = [];
  const fail = (rule, line, msg) => problems.push({rule, line, msg});

  for (const d of validate(text)) {
    fail('validator', d.range.start.line + 1, d.message);
  }

  const instructions = parseInstructions(text);
  const globalArgs = new Map();  // ARGs before the first FROM: name -> default
  const stages = [];             // {name, from, instructions}
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const words = ins.args.split(/\s+/).filter((w) => !w.startsWith('--'));
      const as = words.findIndex((w) => w.toUpperCase() === 'AS');
      stages.push({
        name: as >= 0 ? words[as + 1] : null,
        image: words[0] || '',
        line: ins.line,
        instructions: [],
      });
    } else if (stages.length === 0) {
      if (ins.keyword === 'ARG') {
        const m = ins.args.match(/^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/);
        if (m) globalArgs.set(m[1], (m[2] || '').replace(/^"(.*)"$/, '$1'));
      }
    } else {
      stages[stages.length - 1].instructions.push(ins);
    }
  }
  if (stages.length === 0) {
    fail('from-pinned', 1, 'no FROM');
    return problems;
  }

  // from-pinned, no-latest
  const stageNames = new Set();
  for (const stage of stages) {
    const image = stage.image;
    if (stageNames.has(image)) {
      // An earlier stage.
    } else {
      const m = image.match(/^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$/);
      if (!m) {
        fail('from-pinned', stage.line,
             `FROM ${image}: name the image through an ARG with a digest-pinned default`);
      } else if (!globalArgs.has(m[1])) {
        fail('from-pinned', stage.line,
             `FROM ${image}: ARG ${m[1]} is not declared before the first FROM`);
      } else {
        const ref = globalArgs.get(m[1]);
        if (!DIGEST_REF.test(ref)) {
          fail('from-pinned', stage.line, `ARG ${m[1]}=${ref} is not name:tag@sha256:<64 hex>`);
        }
        if (/:latest(@|$)/.test(ref)) {
          fail('no-latest', stage.line, `ARG ${m[1]}=${ref} uses the latest tag`);
        }
      }
    }
    if (/:latest(@|$)/.test(image)) {
      fail('no-latest', stage.line, `FROM ${image} uses the latest tag`);
    }
    if (stage.name) stageNames.add(stage.name);
  }

  const final = stages[stages.length - 1];
  const last = (keyword) => final.instructions.filter((i) => i.keyword === keyword).pop();

  // user
  const user = last('USER');
  if (!user) {
    fail('user', final.line, 'the final stage has no USER (it would run as root)');
  } else {
    const m = user.args.match(/^(\d+):(\d+)$/);
    if (!m) {
      fail('user', user.line,
           `USER ${user.args}: must be numeric uid:gid (Kubernetes' runAsNonRoot checks numbers)`);
    } else if (m[1] === '0' || m[2] === '0') {
      fail('user', user.line, `USER ${user.args}: root`);
    }
  }

  // entrypoint-tini
  const entrypoint = last('ENTRYPOINT');
  let argv = null;
  try {
    argv = entrypoint ? JSON.parse(entrypoint.args) : null;
  } catch (e) {
    argv = null;
  }
  if (!Array.isArray(argv) || argv[0] !== '/usr/bin/tini' || argv[1] !== '--' || argv.length < 3) {
    fail('entrypoint-tini', entrypoint ? entrypoint.line : final.line,
         'the final stage needs ENTRYPOINT ["/usr/bin/tini", "--", PROGRAM, ...] ' +
             '(an init that reaps zombies)');
  }

  // oci-labels
  const labels = new Map();
  for (const ins of final.instructions.filter((i) => i.keyword === 'LABEL')) {
    for (const [k, v] of parsePairs(ins.args)) labels.set(k, v);
  }
  const stageArgs = new Set(final.instructions.filter((i) => i.keyword === 'ARG')
                                .map((i) => i.args.split('=')[0].trim()));
  for (const name of OCI_LABELS) {
    const key = 'org.opencontainers.image.' + name;
    if (!labels.has(key) || labels.get(key) === '') {
      fail('oci-labels', final.line, `the final stage has no LABEL ${key}`);
    } else if (ARG_VALUED_LABELS.includes(name)) {
      const m = labels.get(key).match(/^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/);
      if (!m || !stageArgs.has(m[1])) {
        fail('oci-labels', final.line,
             `LABEL ${key} must be \${ARG} of an ARG declared in the final stage`);
      }
    }
  }

  // apt
  for (const stage of stages) {
    for (const ins of stage.instructions.filter((i) => i.keyword === 'RUN')) {
      if (/\bapt\s+(install|update|upgrade)\b/.test(ins.args)) {
        fail('apt', ins.line, 'use apt-get, not apt (no stable CLI)');
      }
      if (!/\bapt-get\b[^&;|]*\binstall\b/.test(ins.args)) continue;
      const installs = ins.args.split(/&&|;|\|\|/)
                           .filter((c) => /\bapt-get\b.*\binstall\b/.test(c));
      for (const c of installs) {
        if (!/--no-install-recommends\b/.test(c)) {
          fail('apt', ins.line, 'apt-get install without --no-install-recommends');
        }
      }
      if (!/rm\s+-(rf|fr)\s+\/var\/lib\/apt\/lists/.test(ins.args)) {
        fail('apt', ins.line,
             'a RUN with apt-get install must end with rm -rf /var/lib/apt/lists/*');
      }
    }
  }

  // binaries
  const copied = new Set();
  for (const ins of final.instructions.filter((i) => i.keyword === 'COPY')) {
    const words = ins.args.split(/\s+/).filter((w) => !w.startsWith('--'));
    const dest = words.pop();
    for (const src of words) {
      const base = src.replace(/\/+$/, '').split('/').pop();
      if (dest === '/usr/local/bin/') copied.add(base);
      if (dest === '/usr/local/bin/' + base) copied.add(base);
    }
  }
  for (const name of binaries) {
    if (!copied.has(name)) {
      fail('binaries', final.line, `the final stage does not COPY ${name} into /usr/local/bin/`);
    }
  }
  return problems;
}

function main(argv) {
  const files = argv.filter((a) => !a.startsWith('--'));
  const binariesArg = argv.find((a) => a.startsWith('--binaries='));
  const binaries =
      binariesArg ? binariesArg.slice('--binaries='.length).split(',').filter(Boolean) : [];
  if (files.length !== 1) {
    console.error('usage: dockerfile_lint.js DOCKERFILE [--binaries=NAME,...]');
    return 2;
  }
  const file = files[0];
  const problems = lint(file, fs.readFileSync(file, 'utf8'), binaries);
  for (const p of problems) console.log(`FAIL ${p.rule} ${file}:${p.line}: ${p.msg}`);
  if (problems.length === 0) console.log(`OK ${file}`);
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
