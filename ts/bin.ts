#!/usr/bin/env node
// Entry point of the `kvroute` command (package.json "bin").
import { main } from './cli.js';

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
