/** Self-signed certificates for the TLS tests, made by the real `openssl` (Debian's `openssl`). */

import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { requireTool } from './tools.js';

export interface TestCert {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
  /** SHA-256 fingerprint as Node's `getPeerCertificate().fingerprint256` writes it. */
  fingerprint: string;
  validTo: string;
}

/** A certificate for 127.0.0.1, valid `days` days, written to `<dir>/<name>.{crt,key}`. */
export function makeCert(dir: string, name: string, days = 1): TestCert {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  execFileSync(
    requireTool(['openssl'], 'openssl', ['version']),
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', String(days)].concat([
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]),
    { stdio: 'ignore' },
  );
  const cert = readFileSync(certFile, 'utf8');
  const x509 = new X509Certificate(cert);
  return { certFile, keyFile, cert, key: readFileSync(keyFile, 'utf8'), fingerprint: x509.fingerprint256, validTo: x509.validTo };
}
