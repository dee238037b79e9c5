/**
 * A DNS server on loopback for tests: UDP and TCP on one port (RFC 1035 §4.2),
 * answering TXT questions from a mutable map; any other name is NXDOMAIN.
 * A name mapped to `[]` exists with no TXT record (NOERROR, no answers), so
 * resolvers see ENODATA. A record given as an array is sent as that many
 * character-strings (RFC 1035 §3.3.14), as long TXT values are in practice.
 */
import { createSocket, type Socket } from 'node:dgram';
import { type AddressInfo, createServer as createTcpServer, type Socket as NetSocket, type Server } from 'node:net';
import { createTCPServer, createUDPServer, type DnsHandler, Packet } from 'dns2';

/** One TXT record: a string (one character-string) or its chunks. */
export type TxtRecord = string | readonly string[];

export interface TestDnsServer {
  /** `127.0.0.1:<port>`, ready for DNS_SERVERS. */
  address: string;
  port: number;
  /** Lower-case name without the trailing dot → its TXT records. */
  records: Map<string, TxtRecord[]>;
  /** Every question received, as `<name> <type>` (type as a number). */
  questions: string[];
  close(): Promise<void>;
}

type Handler = DnsHandler;
/** RFC 1035 §4.1.1 RCODE 3 (dns2 ships Packet.RCODE untyped). */
const NXDOMAIN = 3;

/** Starts the server; UDP binds an ephemeral port and TCP takes the same one (retried if it is taken). */
export async function startDnsServer(initial: Record<string, TxtRecord[]> = {}): Promise<TestDnsServer> {
  const records = new Map(Object.entries(initial).map(([name, list]) => [name.toLowerCase(), list]));
  const questions: string[] = [];
  const sockets = new Set<NetSocket>();
  const handle: Handler = (request, send) => {
    const response = Packet.createResponseFromRequest(request);
    const [question] = request.questions;
    const name = (question?.name ?? '').toLowerCase().replace(/\.$/, '');
    questions.push(`${name} ${question?.type}`);
    const found = records.get(name);
    if (!found) response.header.rcode = NXDOMAIN;
    else if (question?.type === Packet.TYPE.TXT) {
      for (const data of found) {
        const chunks = typeof data === 'string' ? data : [...data];
        response.answers.push(Packet.createResourceFromQuestion(question, { ttl: 60, data: chunks }));
      }
    }
    void send(response);
  };
  for (let attempt = 0; ; attempt++) {
    const udp = createUDPServer(handle);
    await udp.listen(0, '127.0.0.1');
    const port = (udp.address() as AddressInfo).port;
    const tcp = createTCPServer(handle);
    tcp.on('connection', (socket: NetSocket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    const bound = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!bound) {
      udp.close();
      if (attempt < 10) continue;
      throw new Error('no port free for both UDP and TCP');
    }
    return {
      address: `127.0.0.1:${port}`,
      port,
      records,
      questions,
      close: async () => {
        await new Promise<void>((resolve) => udp.close(() => resolve()));
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => tcp.close(() => resolve()));
      },
    };
  }
}

/** A UDP and TCP port on loopback that accepts questions and never answers: every lookup times out. */
export async function startSilentDnsServer(): Promise<{ address: string; close(): Promise<void> }> {
  const udp: Socket = createSocket('udp4');
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
  const port = udp.address().port;
  const sockets = new Set<NetSocket>();
  const tcp: Server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen(port, '127.0.0.1', resolve);
  });
  return {
    address: `127.0.0.1:${port}`,
    close: async () => {
      await new Promise<void>((resolve) => udp.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}
