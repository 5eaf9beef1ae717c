import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'ts/index.ts', cli: 'ts/bin.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  target: 'node20',
  // `import.meta.url` locates the native binding; the shim makes it work in the CJS build too.
  shims: true,
  sourcemap: true,
});
