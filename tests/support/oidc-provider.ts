import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
// @ts-expect-error oidc-provider ships no type declarations (the few shapes used here are below).
import Provider from 'oidc-provider';

/**
 * Identity providers for the single sign-on suites, on loopback:
 *
 * - createOidcProvider: panva's oidc-provider, a certified OpenID Provider,
 *   in process on a random port. Authorization code flow with PKCE required,
 *   client_secret_basic, an RS256 key of its own. Its development login page
 *   (fields `login` and `password`; any password, the login is the account's
 *   `sub`) is a real HTML form a browser can fill; signIn drives it over HTTP.
 *   Consent is implied (every client is first-party here).
 * - createFakeIdp: a tiny provider whose token endpoint answers whatever ID
 *   token the test minted (another issuer or audience, expired, `alg: none`,
 *   another key, HS256 keyed with the client secret), with a discovery
 *   document and a JWKS, for the attacks a real provider would never sign.
 */

export interface OidcTestClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface OidcTestProvider {
  /** `http://127.0.0.1:<port>`; the discovery document is under it. */
  issuer: string;
  /** Registers a client after start (a connection's redirect URI names its id). */
  addClient(client: OidcTestClient): void;
  /** Signs in as `sub` through the login form; the URL the provider redirected to at the client's redirect_uri. */
  signIn(authorizationUrl: string, account: { sub: string }): Promise<string>;
  close(): Promise<void>;
}

export interface OidcProviderOptions {
  clients?: OidcTestClient[];
  /** Claims by `sub` (email, email_verified, name, groups...). */
  accounts: Record<string, Record<string, unknown>>;
  /**
   * Whether the ID token carries the scopes' claims (true, as Entra ID, Okta,
   * Google and Keycloak do); false: only the userinfo endpoint does, as the
   * specification's strict reading has it.
   */
  claimsInIdToken?: boolean;
}

const listen = (server: Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );

const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

/** What oidc-provider stores (sessions, interactions, grants, codes, tokens), as far as this adapter reads it. */
type AdapterPayload = Record<string, unknown> & {
  uid?: string;
  userCode?: string;
  grantId?: string;
  consumed?: number;
};

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

/** oidc-provider's storage for one provider, in a Map (its default memory store is shared by the whole process). */
function mapAdapter(clients: Map<string, OidcTestClient>) {
  const store = new Map<string, AdapterPayload>();
  return class MapAdapter {
    constructor(private readonly model: string) {}
    private key = (id: string) => `${this.model}:${id}`;
    async upsert(id: string, payload: AdapterPayload) {
      store.set(this.key(id), payload);
    }
    async find(id: string) {
      if (this.model === 'Client') {
        const client = clients.get(id);
        return client ? { ...client, grant_types: ['authorization_code'], response_types: ['code'] } : undefined;
      }
      return store.get(this.key(id));
    }
    async findByUid(uid: string) {
      return [...store.entries()].find(([key, value]) => key.startsWith(`${this.model}:`) && value.uid === uid)?.[1];
    }
    async findByUserCode(userCode: string) {
      return [...store.values()].find((value) => value.userCode === userCode);
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

export async function createOidcProvider(options: OidcProviderOptions): Promise<OidcTestProvider> {
  const clients = new Map((options.clients ?? []).map((client) => [client.client_id, client]));
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-rs256', alg: 'RS256', use: 'sig' };
  const server = createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const scopes = { email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] };
  const configuration = {
    adapter: mapAdapter(clients),
    jwks: { keys: [signingKey] },
    cookies: { keys: [crypto.randomUUID()] },
    claims: { openid: ['sub'], ...scopes },
    scopes: ['openid', ...Object.keys(scopes)],
    conformIdTokenClaims: options.claimsInIdToken === false,
    pkce: { required: () => true },
    // Set, so the provider does not print a notice for each default it falls back to.
    ttl: { AccessToken: 300, AuthorizationCode: 60, Grant: 600, IdToken: 300, Interaction: 600, Session: 600 },
    features: { devInteractions: { enabled: true } },
    clientDefaults: { token_endpoint_auth_method: 'client_secret_basic', id_token_signed_response_alg: 'RS256' },
    async findAccount(_ctx: unknown, sub: string) {
      const claims = options.accounts[sub];
      if (!claims) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...claims }) };
    },
    // Every client is first-party: the grant is implied, no consent page.
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
  };
  const provider: { on(event: string, listener: () => void): void; callback(): RequestListener } = new Provider(
    issuer,
    configuration,
  );
  // Errors are answered to the client; the provider's own logging would only add noise to the test output.
  provider.on('server_error', () => {});
  server.on('request', provider.callback());

  return {
    issuer,
    addClient: (client) => clients.set(client.client_id, client),
    signIn: (authorizationUrl, account) => driveLogin(authorizationUrl, account.sub),
    close: () => close(server),
  };
}

/** Cookies by name: the provider's are few and distinct, so paths and expiry can be ignored but for deletion. */
function remember(jar: Map<string, string>, response: Response) {
  for (const line of response.headers.getSetCookie()) {
    const [pair = ''] = line.split(';');
    const at = pair.indexOf('=');
    const name = pair.slice(0, at).trim();
    const value = pair.slice(at + 1).trim();
    if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name);
    else jar.set(name, value);
  }
}

const unescapeHtml = (text: string) =>
  text
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#x2F;/g, '/')
    .replace(/&#39;/g, "'");

/** Follows the flow as a browser would, filling the login form (and a consent form, should one appear). */
async function driveLogin(authorizationUrl: string, sub: string): Promise<string> {
  const redirectUri = new URL(authorizationUrl).searchParams.get('redirect_uri');
  if (!redirectUri) throw new Error('the authorization URL has no redirect_uri');
  const jar = new Map<string, string>();
  let url = authorizationUrl;
  let init: { method: string; body?: string } = { method: 'GET' };
  for (let step = 0; step < 20; step += 1) {
    const target = new URL(url);
    if (`${target.origin}${target.pathname}` === redirectUri) return url;
    const response = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: {
        cookie: [...jar].map(([name, value]) => `${name}=${value}`).join('; '),
        ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
    });
    remember(jar, response);
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      await response.body?.cancel();
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

/** How a minted ID token is signed. */
export type FakeSigning =
  /** With the key the JWKS publishes (the default). */
  | 'jwks'
  /** With a key the JWKS does not have, under a kid it does not know. */
  | 'unknown-kid'
  /** With a key the JWKS does not have, under the kid of the one it publishes. */
  | 'same-kid-other-key'
  /** Not at all: `alg: none`, empty signature. */
  | 'none'
  /** HS256 keyed with this secret (the client secret: what a client can verify but also forge). */
  | { hs256: string };

export interface FakeIdp {
  issuer: string;
  clientId: string;
  /** A token for this client, now, with these claims over the defaults (iss, aud, sub, iat, exp, nonce). */
  mint(claims?: Record<string, unknown>, signing?: FakeSigning): Promise<string>;
  /** The ID token the next token request is answered with. */
  answer(idToken: string): void;
  /** What the userinfo endpoint answers (to the bearer of the access token it issued). */
  answerUserinfo(claims: Record<string, unknown>): void;
  /** The last token request, as the provider saw it. */
  lastTokenRequest(): { authorization: string | undefined; body: URLSearchParams } | undefined;
  close(): Promise<void>;
}

const body = (request: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      text += chunk;
    });
    request.on('end', () => resolve(text));
  });

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

export async function createFakeIdp({ clientId, nonce }: { clientId: string; nonce: string }): Promise<FakeIdp> {
  const kid = 'fake-rs256';
  const published = await generateKeyPair('RS256', { extractable: true });
  const other = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(published.publicKey)), kid, alg: 'RS256', use: 'sig' };
  let next = '';
  let userinfo: Record<string, unknown> = {};
  let last: { authorization: string | undefined; body: URLSearchParams } | undefined;
  const server = createServer(async (request, response) => {
    const json = (status: number, value: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(value));
    };
    if (request.url === '/.well-known/openid-configuration')
      return json(200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        userinfo_endpoint: `${issuer}/userinfo`,
      });
    if (request.url === '/userinfo')
      return request.headers.authorization === 'Bearer fake-access-token'
        ? json(200, userinfo)
        : json(401, { error: 'invalid_token' });
    if (request.url === '/jwks') return json(200, { keys: [jwk] });
    if (request.url === '/token' && request.method === 'POST') {
      last = { authorization: request.headers.authorization, body: new URLSearchParams(await body(request)) };
      return json(200, { access_token: 'fake-access-token', token_type: 'Bearer', expires_in: 300, id_token: next });
    }
    json(404, { error: 'not_found' });
  });
  const issuer = `http://127.0.0.1:${await listen(server)}`;

  return {
    issuer,
    clientId,
    async mint(claims = {}, signing = 'jwks') {
      const now = Math.floor(Date.now() / 1000);
      const payload: JWTPayload = { iss: issuer, aud: clientId, sub: 'fake-subject', iat: now, exp: now + 300, nonce };
      Object.assign(payload, { email: 'person@example.com', email_verified: true }, claims);
      for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name];
      if (signing === 'none') return `${encode({ alg: 'none', typ: 'JWT' })}.${encode(payload)}.`;
      if (typeof signing === 'object')
        return new SignJWT(payload)
          .setProtectedHeader({ alg: 'HS256', kid })
          .sign(new TextEncoder().encode(signing.hs256));
      const key = signing === 'jwks' ? published.privateKey : other.privateKey;
      const header = { alg: 'RS256', kid: signing === 'unknown-kid' ? 'not-published' : kid };
      return new SignJWT(payload).setProtectedHeader(header).sign(key);
    },
    answer: (idToken) => {
      next = idToken;
    },
    answerUserinfo: (claims) => {
      userinfo = claims;
    },
    lastTokenRequest: () => last,
    close: () => close(server),
  };
}
