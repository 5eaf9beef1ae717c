import { defineConfig } from 'tsup';

// The library ships as ESM and CJS; the command only as ESM (`bin` points at dist/cli.js).
// No source maps in the package: the bundle is readable TypeScript output, and maps doubled its size.
const common = { target: 'node20', shims: true, sourcemap: false } as const;

export default defineConfig([
  // `import.meta.url` locates the native binding; the shim makes it work in the CJS build too.
  { ...common, entry: { index: 'ts/index.ts' }, format: ['esm', 'cjs'], dts: true, clean: true },
  { ...common, entry: { cli: 'ts/bin.ts' }, format: ['esm'], dts: false, clean: false },
]);
