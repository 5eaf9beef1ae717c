// Bundles app.mjs for Node with kvroute marked external: `node build.mjs <outfile>`.
// (The same as `esbuild app.mjs --bundle --platform=node --format=esm --external:kvroute`.)
import { build } from 'esbuild';

await build({
  entryPoints: [new URL('./app.mjs', import.meta.url).pathname],
  bundle: true,
  platform: 'node',
  format: 'esm',
  outfile: process.argv[2] ?? 'dist/app.mjs',
  external: ['kvroute'],
});
