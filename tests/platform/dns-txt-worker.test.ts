import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect as netConnect } from 'node:net';
import { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWorkerTxtResolver,
  DnsLookupError,
  decodeTxtResponse,
  encodeTxtQuery,
  joinDohTxtData,
  type TcpConnect,
  type TcpSocket,
} from '../../src/platform/dns-txt-worker.js';
import { startDnsServer, startSilentDnsServer, type TestDnsServer } from '../support/dns-server.js';

/** `connect()` of cloudflare:sockets, on node:net: the same web streams over a real TCP connection. */
const nodeConnect: TcpConnect = ({ hostname, port }) => {
  const socket = netConnect(port, hostname);
  const { readable, writable } = Duplex.toWeb(socket);
  return {
    readable: readable as unknown as TcpSocket['readable'],
    writable: writable as unknown as TcpSocket['writable'],
    close: async () => void socket.destroy(),
  };
};

const RECORDS = {
  '_gatehouse-challenge.acme.test': ['v=spf1 -all', 'gatehouse-domain-verification=abc'],
  '_gatehouse-challenge.long.test': [['gatehouse-domain-verification=', 'first-half', 'second-half']],
  '_gatehouse-challenge.nothing.test': [],
};

describe('createWorkerTxtResolver over TCP (DNS_SERVERS set)', () => {
  let dns: TestDnsServer;
  beforeAll(async () => {
    dns = await startDnsServer(RECORDS);
  });
  afterAll(() => dns.close());
  const resolver = () => createWorkerTxtResolver([dns.address], { connect: nodeConnect, timeoutMs: 500, tries: 1 });

  it('answers every record, chunks joined; no record and no name give []', async () => {
    const resolve = resolver();
    expect((await resolve('_gatehouse-challenge.acme.test')).sort()).toEqual([
      'gatehouse-domain-verification=abc',
      'v=spf1 -all',
    ]);
    expect(await resolve('_gatehouse-challenge.long.test')).toEqual([
      'gatehouse-domain-verification=first-halfsecond-half',
    ]);
    expect(await resolve('_gatehouse-challenge.nothing.test')).toEqual([]);
    expect(await resolve('_gatehouse-challenge.unknown.test')).toEqual([]);
  });

  it('a silent server gives [] after the tries; a closed port throws ECONNREFUSED', async () => {
    const silent = await startSilentDnsServer();
    try {
      const started = Date.now();
      const quiet = createWorkerTxtResolver([silent.address], { connect: nodeConnect, timeoutMs: 200, tries: 2 });
      expect(await quiet('acme.test')).toEqual([]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    } finally {
      await silent.close();
    }
    const closed = createWorkerTxtResolver([silent.address], { connect: nodeConnect, timeoutMs: 200, tries: 1 });
    await expect(closed('acme.test')).rejects.toMatchObject({ code: 'ECONNREFUSED', host: 'acme.test' });
  });

  it('refuses to start without connect(), and refuses a malformed name before sending it', async () => {
    expect(() => createWorkerTxtResolver(['127.0.0.1:53'])).toThrow(/cloudflare:sockets/);
    await expect(resolver()('bad..name')).rejects.toBeInstanceOf(DnsLookupError);
  });
});

describe('the DNS message codec', () => {
  it('a query is one TXT question with recursion desired, behind its length', () => {
    const query = encodeTxtQuery(0x1234, 'a.bc');
    expect([...query]).toEqual([0, 22, 0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 97, 2, 98, 99, 0, 0, 16, 0, 1]);
  });

  it('refuses an answer to another query, a truncated one and a SERVFAIL', () => {
    const response = Uint8Array.from([0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, 97, 0, 0, 16, 0, 1]);
    expect(() => decodeTxtResponse(response, 0x9999, 'a')).toThrow(DnsLookupError);
    expect(() => decodeTxtResponse(response, 0x1234, 'a')).toThrow(/EBADRESP/);
    const servfail = Uint8Array.from([0x12, 0x34, 0x81, 0x82, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(() => decodeTxtResponse(servfail, 0x1234, 'a')).toThrow(/ESERVFAIL/);
  });

  it('DoH data: quoted strings joined, escapes undone; unquoted data as is', () => {
    expect(joinDohTxtData('"gatehouse-domain-verification=" "abc"')).toBe('gatehouse-domain-verification=abc');
    expect(joinDohTxtData('"say \\"hi\\" \\065"')).toBe('say "hi" A');
    expect(joinDohTxtData('plain')).toBe('plain');
  });
});

describe('createWorkerTxtResolver over DoH JSON (no DNS_SERVERS)', () => {
  let server: Server;
  let url: string;
  const seen: { accept: string | undefined; query: string }[] = [];
  beforeAll(async () => {
    // Answers as a DoH JSON resolver does: Status (RCODE) and TXT data as quoted strings.
    server = createServer((request, response) => {
      const query = new URL(request.url ?? '/', 'http://x').searchParams;
      seen.push({ accept: request.headers.accept, query: query.toString() });
      const name = query.get('name') ?? '';
      if (name === 'broken.test') return void response.writeHead(502).end();
      const records = (RECORDS as Record<string, (string | string[])[]>)[name];
      const data = (record: string | string[]) =>
        [record]
          .flat()
          .map((chunk) => `"${chunk}"`)
          .join(' ');
      response.setHeader('content-type', 'application/dns-json');
      response.end(
        JSON.stringify({
          Status: records ? 0 : 3,
          Answer: records?.map((record) => ({ name, type: 16, TTL: 60, data: data(record) })),
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/dns-query`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('asks for TXT in JSON and reads the records; NXDOMAIN and no records give []', async () => {
    const resolve = createWorkerTxtResolver(null, { dohUrl: url });
    expect(await resolve('_gatehouse-challenge.long.test')).toEqual([
      'gatehouse-domain-verification=first-halfsecond-half',
    ]);
    expect(await resolve('_gatehouse-challenge.nothing.test')).toEqual([]);
    expect(await resolve('_gatehouse-challenge.unknown.test')).toEqual([]);
    expect(seen[0]).toEqual({ accept: 'application/dns-json', query: 'name=_gatehouse-challenge.long.test&type=TXT' });
  });

  it('an HTTP error throws DnsLookupError', async () => {
    await expect(createWorkerTxtResolver(null, { dohUrl: url })('broken.test')).rejects.toMatchObject({
      code: 'EHTTP502',
    });
  });
});
