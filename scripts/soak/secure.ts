/**
 * The soak's `--secure` setting: everything that can be guarded is, as a production fleet runs.
 * One private CA signs every server's certificate (the workers', the gateways', NATS's) and the
 * gateways' client certificate. The workers serve HTTPS, require that client certificate
 * (vLLM's `--ssl-ca-certs`) and an API key (`--api-key`); the gateways serve HTTPS and guard
 * `/v1` with an API key and their admin routes, `/metrics` and `/dump` with a token; NATS
 * requires TLS and verifies its clients' certificates. So the faults meet TLS everywhere: workers
 * restarted behind their pools' connections, gateways warm-starting from a peer's `/dump` over
 * HTTPS (with the fleet's admin token, which the gateway sends itself), NATS reconnections after
 * outages and partitions. The soak's own requests (its clients, its scrapes) trust the CA and
 * carry the key or the token.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, type Dispatcher, setGlobalDispatcher } from 'undici';
import { makeCa, makeClientCert, makeServerCert, type TestCert } from '../../test/helpers/certs.js';
import type { GatewayOptions, MockWorkerOptions, NatsTlsOptions } from '../../ts/index.js';

export class SoakSecurity {
  readonly apiKey = 'soak-client-key';
  readonly adminToken = 'soak-admin-token';
  readonly workerKey = 'soak-worker-key';

  private constructor(
    private readonly dir: string,
    private readonly ca: TestCert,
    private readonly server: TestCert,
    private readonly client: TestCert,
  ) {}

  /** A CA, a server certificate for 127.0.0.1 and a client certificate, in a directory of their own. */
  static make(): SoakSecurity {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-soak-pki-'));
    const ca = makeCa(dir, 'soak-ca');
    return new SoakSecurity(dir, ca, makeServerCert(dir, 'soak-server', ca), makeClientCert(dir, 'soak-client', ca));
  }

  /** A worker's: HTTPS, a client certificate required, and an API key. */
  workerOptions(): Partial<MockWorkerOptions> {
    return { sslCertfile: this.server.certFile, sslKeyfile: this.server.keyFile, sslCaCerts: this.ca.certFile, apiKey: this.workerKey };
  }

  /** A gateway's, over `base`: HTTPS, its keys, and its workers reached with the CA, the client certificate and their key. */
  gatewayOptions(base: GatewayOptions): GatewayOptions {
    return {
      ...base,
      tls: { certFile: this.server.certFile, keyFile: this.server.keyFile },
      auth: { apiKeys: [this.apiKey], adminToken: this.adminToken },
      upstream: { ...base.upstream, apiKey: this.workerKey, tls: this.clientTls() },
    };
  }

  /** The TLS of a gateway's connections to NATS and to a peer: the CA, and the client certificate. */
  clientTls(): NatsTlsOptions {
    return { caFile: this.ca.certFile, certFile: this.client.certFile, keyFile: this.client.keyFile };
  }

  /** nats-server's arguments: TLS with the server certificate, clients verified against the CA. */
  natsArgs(): string[] {
    return ['--tls', '--tlscert', this.server.certFile, '--tlskey', this.server.keyFile, '--tlsverify', '--tlscacert', this.ca.certFile];
  }

  /**
   * Makes this process's `fetch` trust the CA and send the API key to `/v1` and the admin token
   * elsewhere (the soak's clients and scrapes). A gateway in this process makes its own
   * connections (its pools, and its warm start's, which {@link clientTls} gives a dispatcher of
   * its own), so none of them borrow these keys.
   */
  trustInThisProcess(): void {
    const keys =
      (dispatch: Dispatcher['dispatch']): Dispatcher['dispatch'] =>
      (opts, handler) => {
        const token = opts.path.startsWith('/v1/') ? this.apiKey : this.adminToken;
        const headers = { ...(opts.headers as Record<string, string> | undefined), authorization: `Bearer ${token}` };
        return dispatch({ ...opts, headers }, handler);
      };
    setGlobalDispatcher(new Agent({ connect: { ca: this.ca.cert } }).compose(keys));
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
