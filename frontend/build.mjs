// Builds the dashboard into mqttq/admin/dashboard/static/ (run by scripts/build-dashboard.sh):
// app.js (one ES module bundle: preact + htm, uPlot, mqtt.js and the views), app.css (uPlot's
// CSS then ours), index.html, login.html (the template the server fills: {{error}}), and the
// libraries' licence texts under licenses/. Nothing is fetched at run time.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'mqttq', 'admin', 'dashboard', 'static');
const modules = join(here, 'node_modules');

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'licenses'), { recursive: true });

await build({
  entryPoints: [join(here, 'src', 'main.js')],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome110', 'firefox110', 'safari16'],
  minify: true,
  legalComments: 'external',
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});

const css = [
  readFileSync(join(modules, 'uplot', 'dist', 'uPlot.min.css'), 'utf8'),
  readFileSync(join(here, 'src', 'app.css'), 'utf8'),
].join('\n');
writeFileSync(join(out, 'app.css'), css);
copyFileSync(join(here, 'src', 'index.html'), join(out, 'index.html'));
copyFileSync(join(here, 'src', 'login.html'), join(out, 'login.html'));
copyFileSync(join(here, 'src', 'favicon.svg'), join(out, 'favicon.svg'));

// The licence of every package bundled into app.js or app.css.
const bundled = ['preact', 'htm', 'uplot', 'mqtt'];
for (const name of bundled) {
  const pkg = JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8'));
  const file = readdirSync(join(modules, name)).find((f) => /^licen[cs]e/i.test(f));
  const text = readFileSync(join(modules, name, file), 'utf8');
  writeFileSync(
    join(out, 'licenses', `${name}.txt`),
    `${name} ${pkg.version} (${pkg.license})\n\n${text}`,
  );
}
// The notices esbuild found in the bundled code (MQTT.js's own bundle of ieee754,
// safe-buffer, regenerator-runtime), beside the licences.
renameSync(join(out, 'app.js.LEGAL.txt'), join(out, 'licenses', 'bundled-notices.txt'));
console.log(`dashboard built into ${out}`);
