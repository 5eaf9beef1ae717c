/**
 * Reading and checking PEM files for TLS, wherever kvroute takes them (the gateway's listener and
 * its connections to workers, the mock worker, NATS): each named in its error, and loaded as a
 * TLS context will load it, so a bad file fails at start rather than at the first handshake.
 * @internal
 * @module
 */

import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { invalidArg } from './errors.js';

/** A certificate and its key (PEM), loaded as a TLS context will; `what` names them in the error. */
export function checkKeyPair(cert: string | Buffer, key: string | Buffer, what: string): void {
  try {
    createSecureContext({ cert, key });
    new X509Certificate(cert);
  } catch (err) {
    throw invalidArg(`${what} do not load as a TLS certificate and its key: ${(err as Error).message}`);
  }
}

/**
 * A bundle of CA certificates, each read: a TLS context takes what it can of a bundle and drops
 * the rest silently, so a torn or mistyped file would trust fewer CAs than meant.
 */
export function checkCaBundle(ca: string | Buffer, what: string): void {
  try {
    const pems = String(ca).match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    if (pems.length === 0) throw new Error('no PEM certificate in it');
    for (const pem of pems) new X509Certificate(pem);
    createSecureContext({ ca });
  } catch (err) {
    throw invalidArg(`${what} do not load: ${(err as Error).message}`);
  }
}

/** A PEM file's bytes; `ERR_INVALID_ARG` naming `at` when it cannot be read. */
export function readPemFile(path: string, at: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw invalidArg(`${at} cannot be read: ${(err as Error).message}`);
  }
}

/** The PEM bytes of a TLS option's files: a CA bundle, and a certificate with its key. */
export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** What each file is called in errors: the option's keys under `at` (`upstream.tls.caFile`…). */
export function tlsFileNames(at: string): { caFile: string; certFile: string; keyFile: string } {
  return { caFile: `${at}.caFile`, certFile: `${at}.certFile`, keyFile: `${at}.keyFile` };
}

/**
 * Reads a CA bundle and a certificate with its key (the pair only when both are given) and
 * checks each as a TLS context will load it; `ERR_INVALID_ARG` naming the file at fault as
 * `names` calls it (an option's key, or an environment variable).
 */
export function readTlsFiles(
  files: { caFile?: string | undefined; certFile?: string | undefined; keyFile?: string | undefined },
  names: { caFile: string; certFile: string; keyFile: string },
): TlsMaterial {
  const out: TlsMaterial = {};
  if (files.caFile !== undefined) {
    out.ca = readPemFile(files.caFile, names.caFile);
    checkCaBundle(out.ca, names.caFile);
  }
  if (files.certFile !== undefined && files.keyFile !== undefined) {
    out.cert = readPemFile(files.certFile, names.certFile);
    out.key = readPemFile(files.keyFile, names.keyFile);
    checkKeyPair(out.cert, out.key, `${names.certFile} and ${names.keyFile}`);
  }
  return out;
}
