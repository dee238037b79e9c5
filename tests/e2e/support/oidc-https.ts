import { createServer as createHttpsServer, request as httpsRequest, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
// @ts-expect-error oidc-provider ships no type declarations (the few shapes used here are below).
import Provider from 'oidc-provider';

/**
 * panva's oidc-provider over https:// on loopback, for the Worker suite. The
 * Worker runs with production settings, where an issuer and every endpoint
 * of its discovery document must be `https://` (docs/sso.md "Addresses");
 * tests/support/oidc-provider.ts serves `http://` only, so this is the same
 * provider (authorization code with PKCE required, client_secret_basic, an
 * RS256 key of its own, consent implied, the development login form) behind
 * TLS with a certificate workerd trusts through SSL_CERT_FILE. The test
 * process reaches it with `tlsFetch` (trusting that certificate only): Node 20's
 * fetch takes no CA of its own.
 */

export interface HttpsOidcClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface HttpsOidcProvider {
  /** `https://127.0.0.1:<port>`. */
  issuer: string;
  addClient(client: HttpsOidcClient): void;
  /** `<method> <path>` of every request the provider answered, in order (the Worker's discovery, token and JWKS calls). */
  requests: string[];
  /** Signs in as `sub` through the login form; the URL the provider redirected to at the client's redirect_uri. */
  signIn(authorizationUrl: string, sub: string): Promise<string>;
  close(): Promise<void>;
}

/** A fetch over node:https that trusts `ca` (a PEM certificate) and nothing else; never follows redirects. */
export function tlsFetch(ca: string) {
  return (url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
    new Promise<Response>((resolve, reject) => {
      const req = httpsRequest(url, { method: init.method ?? 'GET', headers: init.headers, ca }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers))
            for (const one of [value ?? []].flat()) headers.append(name, one);
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers }));
        });
      });
      req.on('error', reject);
      req.end(init.body);
    });
}

/** oidc-provider's storage, in a Map; clients from `clients` (registered after the connection names its id). */
function mapAdapter(clients: Map<string, HttpsOidcClient>) {
  const store = new Map<string, Record<string, unknown>>();
  return class MapAdapter {
    constructor(private readonly model: string) {}
    private key = (id: string) => `${this.model}:${id}`;
    async upsert(id: string, payload: Record<string, unknown>) {
      store.set(this.key(id), payload);
    }
    async find(id: string) {
      if (this.model !== 'Client') return store.get(this.key(id));
      const client = clients.get(id);
      return client ? { ...client, grant_types: ['authorization_code'], response_types: ['code'] } : undefined;
    }
    async findByUid(uid: string) {
      return [...store.entries()].find(([key, value]) => key.startsWith(`${this.model}:`) && value.uid === uid)?.[1];
    }
    async consume(id: string) {
      const payload = store.get(this.key(id));
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, value] of store) if (value.grantId === grantId) store.delete(key);
    }
  };
}

interface GrantModel {
  addOIDCScope(scope: string): void;
  addOIDCClaims(claims: string[]): void;
  save(): Promise<string>;
}

/** The part of oidc-provider's request context loadExistingGrant reads. */
interface ProviderContext {
  oidc: {
    provider: {
      Grant: { new (init: { clientId: string; accountId: string }): GrantModel; find(id: string): Promise<GrantModel> };
    };
    result?: { consent?: { grantId?: string } };
    session: { accountId: string; grantIdFor(clientId: string): string | undefined };
    client: { clientId: string };
  };
}

export async function startHttpsOidcProvider(options: {
  tls: { key: string; cert: string };
  /** Claims by `sub` (email, email_verified, name). */
  accounts: Record<string, Record<string, unknown>>;
}): Promise<HttpsOidcProvider> {
  const clients = new Map<string, HttpsOidcClient>();
  const requests: string[] = [];
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'e2e-rs256', alg: 'RS256', use: 'sig' };
  const server: Server = createHttpsServer({ key: options.tls.key, cert: options.tls.cert });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
  const issuer = `https://127.0.0.1:${port}`;
  const scopes = { email: ['email', 'email_verified'], profile: ['name'] };
  const provider: { on(event: string, listener: () => void): void; callback(): (req: never, res: never) => void } =
    new Provider(issuer, {
      adapter: mapAdapter(clients),
      jwks: { keys: [signingKey] },
      cookies: { keys: [crypto.randomUUID()] },
      claims: { openid: ['sub'], ...scopes },
      scopes: ['openid', ...Object.keys(scopes)],
      pkce: { required: () => true },
      ttl: { AccessToken: 300, AuthorizationCode: 60, Grant: 600, IdToken: 300, Interaction: 600, Session: 600 },
      features: { devInteractions: { enabled: true } },
      clientDefaults: { token_endpoint_auth_method: 'client_secret_basic', id_token_signed_response_alg: 'RS256' },
      async findAccount(_ctx: unknown, sub: string) {
        const claims = options.accounts[sub];
        return claims ? { accountId: sub, claims: async () => ({ sub, ...claims }) } : undefined;
      },
      async loadExistingGrant(ctx: ProviderContext) {
        const { Grant } = ctx.oidc.provider;
        const existing = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
        if (existing) return Grant.find(existing);
        const grant = new Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
        grant.addOIDCScope(['openid', ...Object.keys(scopes)].join(' '));
        grant.addOIDCClaims(['sub', ...Object.values(scopes).flat()]);
        await grant.save();
        return grant;
      },
    });
  provider.on('server_error', () => {});
  const handle = provider.callback();
  server.on('request', (req, res) => {
    requests.push(`${req.method} ${new URL(req.url ?? '/', issuer).pathname}`);
    handle(req as never, res as never);
  });
  const fetchTls = tlsFetch(options.tls.cert);

  return {
    issuer,
    requests,
    addClient: (client) => clients.set(client.client_id, client),
    signIn: (authorizationUrl, sub) => driveLogin(fetchTls, authorizationUrl, sub),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const unescapeHtml = (text: string) =>
  text
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x2F;/g, '/')
    .replace(/&#39;/g, "'");

/** Follows the flow as a browser would, filling the login form (and a consent form, should one appear). */
async function driveLogin(fetchTls: ReturnType<typeof tlsFetch>, authorizationUrl: string, sub: string) {
  const redirectUri = new URL(authorizationUrl).searchParams.get('redirect_uri');
  if (!redirectUri) throw new Error('the authorization URL has no redirect_uri');
  const jar = new Map<string, string>();
  let url = authorizationUrl;
  let init: { method: string; body?: string } = { method: 'GET' };
  for (let step = 0; step < 20; step += 1) {
    const target = new URL(url);
    if (`${target.origin}${target.pathname}` === redirectUri) return url;
    const headers: Record<string, string> = { cookie: [...jar].map(([name, value]) => `${name}=${value}`).join('; ') };
    if (init.body) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetchTls(url, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const value = pair.slice(at + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(pair.slice(0, at).trim());
      else jar.set(pair.slice(0, at).trim(), value);
    }
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      url = new URL(location, url).href;
      init = { method: 'GET' };
      continue;
    }
    const html = await response.text();
    const form = /<form[^>]*action="([^"]+)"[^>]*method="post"/i.exec(html);
    if (response.status !== 200 || !form)
      throw new Error(`signIn: ${response.status} at ${url}: ${html.slice(0, 300)}`);
    const fields = new URLSearchParams();
    for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g))
      fields.set(name!, unescapeHtml(value!));
    if (fields.get('prompt') === 'login') {
      fields.set('login', sub);
      fields.set('password', 'any password');
    }
    url = new URL(unescapeHtml(form[1]!), url).href;
    init = { method: 'POST', body: fields.toString() };
  }
  throw new Error('signIn: too many steps');
}
