// A service bundled with esbuild that uses kvroute. kvroute stays external (see build.mjs): its
// native module is a .node file that a bundler cannot inline, and the package finds it next to
// its own dist/ at run time.
import { backend, blockHashes } from 'kvroute';

console.log(backend, blockHashes([1, 2, 3, 4], 4)[0]);
