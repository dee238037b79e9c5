import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import type { components } from '../../src/client/schema.js';
import { createDeliverer, type DelivererOptions } from '../../src/webhooks/deliverer.js';
import { createSecretBox } from '../../src/webhooks/secrets.js';
import type { TestApp } from './app.js';
import { call, expectStatus } from './http.js';
import type { Actor } from './orgs.js';

/** What a test receiver does with one request. */
export type Answer =
  | { status: number; body?: string; headers?: Record<string, string> }
  /** Never answers (the deliverer's timeout ends it). */
  | 'hang'
  /** Destroys the socket without an answer. */
  | 'close'
  /** Sends the status line, headers and a first byte of a 500's body, then nothing more (the body never ends). */
  | 'trickle';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Requests being answered right now, and the most there ever were at once. */
  inFlight: { now: number; max: number };
  close(): Promise<void>;
}

/**
 * A real HTTP receiver on loopback (node:http): `answer` decides each
 * response from the number of requests received before it.
 */
export async function startReceiver(
  answer: (index: number) => Answer | Promise<Answer> = () => ({ status: 200 }),
  options: { tls?: SelfSigned } = {},
): Promise<Receiver> {
  const received: Received[] = [];
  const inFlight = { now: 0, max: 0 };
  const handle: RequestListener = (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const index = received.length;
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      inFlight.now += 1;
      inFlight.max = Math.max(inFlight.max, inFlight.now);
      const done = () => {
        inFlight.now -= 1;
      };
      const decided = await answer(index);
      if (decided === 'hang') {
        request.socket.on('close', done);
        return;
      }
      if (decided === 'trickle') {
        request.socket.on('close', done);
        response.writeHead(500, { 'content-type': 'text/plain' });
        response.write('s');
        return;
      }
      if (decided === 'close') {
        done();
        request.socket.destroy();
        return;
      }
      done();
      response.writeHead(decided.status, decided.headers ?? {});
      response.end(decided.body ?? '');
    });
  };
  const server: Server = options.tls
    ? createTlsServer({ key: options.tls.key, cert: options.tls.cert }, handle)
    : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/hook`,
    received,
    inFlight,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The receivers a test file starts, closed together after each test. */
export function receiverPool() {
  const started: Receiver[] = [];
  return {
    async start(answer?: (index: number) => Answer | Promise<Answer>): Promise<Receiver> {
      const receiver = await startReceiver(answer);
      started.push(receiver);
      return receiver;
    },
    async closeAll(): Promise<void> {
      await Promise.all(started.splice(0).map((receiver) => receiver.close()));
    },
  };
}

export interface Tarpit {
  /** `http://127.0.0.1:<port>`: append a path per endpoint. */
  origin: string;
  /**
   * Connections open now, the most at once, accepted in all, closed by the
   * client, and that carried a request (a client may also open one it never
   * uses: undici reconnects after an aborted request).
   */
  connections: { now: number; max: number; total: number; closed: number; requests: number };
  close(): Promise<void>;
}

/**
 * A TCP listener on loopback that accepts every connection, reads what comes
 * (so it sees the client close) and never writes a byte: the receiver that
 * never answers, not even to say no.
 */
export async function startTarpit(): Promise<Tarpit> {
  const connections = { now: 0, max: 0, total: 0, closed: 0, requests: 0 };
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    connections.now += 1;
    connections.total += 1;
    connections.max = Math.max(connections.max, connections.now);
    socket.on('error', () => {});
    socket.once('data', () => {
      connections.requests += 1;
    });
    socket.resume();
    socket.on('close', () => {
      sockets.delete(socket);
      connections.now -= 1;
      connections.closed += 1;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface SelfSigned {
  key: string;
  cert: string;
  /** The certificate's file: a client trusts it through SSL_CERT_FILE (workerd does). */
  certFile: string;
}

/** A self-signed certificate for 127.0.0.1 (openssl), for an https:// receiver in production mode. */
export function selfSignedCertificate(): SelfSigned {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-tls-'));
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1'].concat([
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]),
    { stdio: 'ignore' },
  );
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}

/** Verifies one received delivery with the reference implementation (standardwebhooks) and returns its body. */
export function verified(secret: string, delivery: Received): WebhookEvent {
  const headers = {
    'webhook-id': String(delivery.headers['webhook-id']),
    'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
    'webhook-signature': String(delivery.headers['webhook-signature']),
  };
  return new Webhook(secret).verify(delivery.body, headers) as WebhookEvent;
}

export interface WebhookEvent {
  type: string;
  timestamp: string;
  data: {
    id: string;
    action: string;
    actorId: string | null;
    organizationId: string;
    metadata: Record<string, unknown>;
    createdAt: string;
  };
}

/** The contract's records, as the OpenAPI document (and the typed client) has them. */
export type CreatedWebhook = components['schemas']['CreatedWebhook'];

export async function createWebhook(
  t: TestApp,
  actor: Actor,
  body: { url: string; events: string[]; description?: string },
): Promise<CreatedWebhook> {
  return expectStatus<CreatedWebhook>(await call(t, '/api/webhooks', { body, jar: actor.jar }), 201);
}

export type DeliveryRecord = components['schemas']['WebhookDelivery'];

export async function deliveriesOf(t: TestApp, actor: Actor, webhookId: string): Promise<DeliveryRecord[]> {
  const page = await expectStatus<{ items: DeliveryRecord[] }>(
    await call(t, `/api/webhooks/${webhookId}/deliveries?limit=100`, { jar: actor.jar }),
    200,
  );
  return page.items;
}

/** The service's deliverer on the test app's database, clock and configuration. */
export function testDeliverer(t: TestApp, options: Partial<DelivererOptions> = {}) {
  return createDeliverer({
    db: t.db,
    logger: t.logger,
    clock: t.clock,
    secrets: createSecretBox(t.config.auth.secret),
    retrySchedule: t.config.webhooks.retrySchedule,
    urlPolicy: { httpsOnly: false, allowPrivate: true },
    ...options,
  });
}
