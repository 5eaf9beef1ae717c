// `npm run build:native`: builds the native module with napi-rs when Rust is installed. In a
// clone without Rust (`npm install` runs this through `prepare`), it says what is missing and
// how to get it, and the build goes on with the pure-JS backend only: kvroute then works, slower.
// KVROUTE_REQUIRE_NATIVE=1 makes a missing toolchain an error instead (CI sets it).
import { spawnSync } from 'node:child_process';

const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
if (cargo.error || cargo.status !== 0) {
  const message = [
    'kvroute: Rust is not installed (no `cargo` on PATH), so the native module is not built.',
    '  The pure-JS backend is built instead: every API works, the hot paths are slower.',
    '  For the native backend, install Rust 1.88 or newer (https://rustup.rs, or your package',
    "  manager's rustc and cargo) and run `npm run build:native`.",
  ].join('\n');
  if (process.env.KVROUTE_REQUIRE_NATIVE === '1') {
    console.error(`${message}\n  KVROUTE_REQUIRE_NATIVE=1 is set: failing.`);
    process.exit(1);
  }
  console.warn(message);
  process.exit(0);
}
const args = [
  'build',
  '--platform',
  ...process.argv.slice(2),
  '--manifest-path',
  'crates/kvroute-node/Cargo.toml',
  '--package-json-path',
  'package.json',
  '-o',
  'native',
  '--js',
  'binding.cjs',
  '--dts',
  'binding.d.cts',
];
const napi = spawnSync('napi', args, { stdio: 'inherit', shell: process.platform === 'win32' });
process.exit(napi.status ?? 1);
