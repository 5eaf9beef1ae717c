// `npm run build:native`: builds the native module with napi-rs when Rust is installed. In a
// clone without Rust (`npm install` runs this through `prepare`), it says what is missing and
// how to get it, and the build goes on with the pure-JS backend only: kvroute then works, slower.
// KVROUTE_REQUIRE_NATIVE=1 makes a missing toolchain an error instead (CI sets it).
//
// On linux-x64 the module is linked against glibc 2.17 (CentOS 7 and every later distribution)
// with napi-rs's cross toolchain from the npm registry (`@napi-rs/cross-toolchain-x64-target-x86_64`,
// gcc 4.8 and a glibc 2.17 sysroot): built with the host's toolchain it would need the build
// machine's glibc (2.34 here) and fall back to JS on Debian 11, Ubuntu 20.04, RHEL 8 and Amazon
// Linux 2. `napi build --use-napi-cross` would do the same but asks the registry for a toolchain
// version that was never published (1.0.5), so the toolchain is set up here.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

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
const TRIPLE = 'x86_64-unknown-linux-gnu';

/** cc-rs and cargo variables that build with the glibc 2.17 toolchain, or undefined without it. */
function baselineToolchain() {
  if (process.platform !== 'linux' || process.arch !== 'x64' || process.env.KVROUTE_HOST_TOOLCHAIN === '1') return undefined;
  let tarball;
  try {
    tarball = createRequire(import.meta.url)('@napi-rs/cross-toolchain-x64-target-x86_64').toolchainPath;
  } catch {
    console.warn("kvroute: the glibc 2.17 toolchain package is not installed; linking against this machine's glibc.");
    return undefined;
  }
  const dir = resolve('target', 'glibc-2.17-toolchain');
  const gcc = join(dir, 'bin', `${TRIPLE}-gcc`);
  if (!existsSync(gcc)) {
    mkdirSync(dir, { recursive: true });
    const tar = spawnSync('tar', ['xJf', tarball, '-C', dir], { stdio: 'inherit' });
    if (tar.status !== 0) {
      console.warn("kvroute: could not unpack the glibc 2.17 toolchain (tar with xz); linking against this machine's glibc.");
      return undefined;
    }
  }
  const bin = (tool) => join(dir, 'bin', `${TRIPLE}-${tool}`);
  const t = TRIPLE.replaceAll('-', '_');
  return {
    [`CC_${t}`]: bin('gcc'),
    [`CXX_${t}`]: bin('g++'),
    [`AR_${t}`]: bin('ar'),
    // libzmq is C++11; gcc 4.8 needs to be told.
    [`CXXFLAGS_${t}`]: '-std=gnu++11',
    [`CARGO_TARGET_${t.toUpperCase()}_LINKER`]: bin('gcc'),
  };
}

const baseline = baselineToolchain();
const args = [
  'build',
  '--platform',
  // An explicit target keeps these objects apart from `cargo test`'s host build (no rebuilds).
  ...(baseline ? ['--target', TRIPLE] : []),
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
const napi = spawnSync('napi', args, {
  stdio: 'inherit',
  shell: process.platform === 'win32',
  env: { ...process.env, ...baseline },
});
process.exit(napi.status ?? 1);
