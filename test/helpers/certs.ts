/** Self-signed certificates for the TLS tests, made by the real `openssl` (Debian's `openssl`). */

import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
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
  return read(certFile, keyFile);
}

/** A CA for 127.0.0.1's tests (`<dir>/<name>.{crt,key}`), to sign client certificates with. */
export function makeCa(dir: string, name: string): TestCert {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  execFileSync(
    requireTool(['openssl'], 'openssl', ['version']),
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${name}`].concat([
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]),
    { stdio: 'ignore' },
  );
  return read(certFile, keyFile);
}

/** A client certificate `ca` signed (`<dir>/<name>.{crt,key}`). */
export function makeClientCert(dir: string, name: string, ca: TestCert): TestCert {
  return makeSignedCert(dir, name, ca, 'extendedKeyUsage=clientAuth\n');
}

/** A server certificate for 127.0.0.1 (and localhost, the name the NATS client checks for it) that `ca` signed (`<dir>/<name>.{crt,key}`). */
export function makeServerCert(dir: string, name: string, ca: TestCert): TestCert {
  return makeSignedCert(dir, name, ca, 'extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n');
}

function makeSignedCert(dir: string, name: string, ca: TestCert, extensions: string): TestCert {
  const openssl = requireTool(['openssl'], 'openssl', ['version']);
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, extensions);
  execFileSync(openssl, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', csr, '-subj', `/CN=${name}`], {
    stdio: 'ignore',
  });
  execFileSync(
    openssl,
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.certFile,
      '-CAkey',
      ca.keyFile,
      '-CAcreateserial',
      '-out',
      certFile,
      '-days',
      '1',
      '-extfile',
      ext,
    ],
    { stdio: 'ignore' },
  );
  return read(certFile, keyFile);
}

function read(certFile: string, keyFile: string): TestCert {
  const cert = readFileSync(certFile, 'utf8');
  const x509 = new X509Certificate(cert);
  return { certFile, keyFile, cert, key: readFileSync(keyFile, 'utf8'), fingerprint: x509.fingerprint256, validTo: x509.validTo };
}
