import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authnRequestUrl } from '../../src/sso/saml.js';
import { createSamlIdp, createSigningKey, type TestSamlIdp } from '../support/saml-idp.js';

/**
 * The SAML module in workerd (docs/workers.md): src/sso/saml.ts bundled by
 * wrangler with the project's compatibility date and flags (nodejs_compat:
 * samlify, xml-crypto and xmldom use Buffer, zlib and node:crypto), run by
 * miniflare, fed responses our test IdP signs in Node. What differs there
 * is the runtime's crypto: BoringSSL's X509Certificate (samlify's key
 * extraction) and node:crypto's verify (xml-crypto's).
 */
const REPO_ROOT = join(import.meta.dirname, '../..');
const SAML = join(REPO_ROOT, 'src/sso/saml.ts');
/** What the module adds to the Worker, gzipped (143 KiB when written, samlify's dependencies nearly all of it). */
const BUDGET_GZIP = 160 * 1024;

const ENTRY = `
import * as saml from ${JSON.stringify(SAML)};
export default {
  async fetch(request) {
    const { op, input } = await request.json();
    try {
      const value = op === 'validate'
        ? await saml.validateSamlResponse({ ...input, now: new Date(input.now) })
        : saml[op](input);
      return Response.json({ ok: true, value });
    } catch (error) {
      return Response.json({ ok: false, name: error.name, code: error.code, message: error.message });
    }
  },
};
`;

interface Answer {
  ok: boolean;
  value?: unknown;
  name?: string;
  code?: string;
  message?: string;
}

const sp = { entityId: 'https://auth.example.com/md', acsUrl: 'https://auth.example.com/acs' };
let dir: string;
let mf: Miniflare;
let bundle: Buffer;
let idp: TestSamlIdp;
let requestId: string;
let requestUrl: string;

async function call(op: string, input: unknown): Promise<Answer> {
  const response = await mf.dispatchFetch('http://worker/', { method: 'POST', body: JSON.stringify({ op, input }) });
  return (await response.json()) as Answer;
}

const validate = (samlResponse: string) =>
  call('validate', {
    samlResponse,
    sp,
    idp: { entityId: idp.entityId, certificates: [idp.certificate] },
    expectedRequestId: requestId,
    now: new Date().toISOString(),
    clockSkewSeconds: 60,
  });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-saml-worker-'));
  const toml = await readFile(join(REPO_ROOT, 'wrangler.toml'), 'utf8');
  const date = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)![1]!;
  const flags = JSON.parse(/^compatibility_flags\s*=\s*(\[[^\]]*\])/m.exec(toml)![1]!) as string[];
  await writeFile(join(dir, 'entry.js'), ENTRY);
  await writeFile(
    join(dir, 'wrangler.toml'),
    `name = "saml-check"\nmain = "entry.js"\ncompatibility_date = "${date}"\ncompatibility_flags = ${JSON.stringify(flags)}\nminify = true\n`,
  );
  await promisify(execFile)(
    process.execPath,
    [join(REPO_ROOT, 'node_modules/wrangler/bin/wrangler.js'), 'deploy', '--dry-run', '--outdir', join(dir, 'out')],
    { cwd: dir, env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1' } },
  );
  bundle = await readFile(join(dir, 'out/entry.js'));
  mf = new Miniflare({
    modules: [{ type: 'ESModule', path: join(dir, 'out/entry.js') }],
    modulesRoot: join(dir, 'out'),
    compatibilityDate: date,
    compatibilityFlags: flags,
  });
  idp = await createSamlIdp({ entityId: 'https://idp.example/metadata', ssoUrl: 'https://idp.example/sso' });
  ({ url: requestUrl, requestId } = authnRequestUrl({
    sp,
    idp: { entityId: idp.entityId, entryPoint: idp.ssoUrl, certificates: [idp.certificate] },
    relayState: 'state',
  }));
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('SAML in workerd', () => {
  it('stays within its size budget', () => {
    expect(gzipSync(bundle).length).toBeLessThan(BUDGET_GZIP);
  });

  it('reads metadata, checks certificates and writes ours', async () => {
    expect(await call('parseIdpMetadata', idp.metadataXml)).toEqual({
      ok: true,
      value: { entityId: idp.entityId, entryPoint: idp.ssoUrl, certificates: [idp.certificate] },
    });
    expect(await call('checkCertificate', idp.key.certificatePem)).toEqual({ ok: true, value: idp.certificate });
    const metadata = await call('spMetadata', sp);
    expect(metadata.value).toContain('WantAssertionsSigned="true"');
    const request = await call('authnRequestUrl', { sp, idp: { ...idp, entryPoint: idp.ssoUrl }, relayState: 's' });
    expect(String(request.value && (request.value as { url: string }).url)).toMatch(
      /^https:\/\/idp\.example\/sso\?SAMLRequest=/,
    );
  });

  it('accepts a signed assertion and a signed response', async () => {
    for (const sign of ['assertion', 'response'] as const) {
      const answer = await validate(
        await idp.respond({ authnRequestUrl: requestUrl, email: 'ada@acme.example', sign }),
      );
      expect(answer).toMatchObject({ ok: true, value: { email: 'ada@acme.example' } });
    }
  });

  it('refuses a wrapped response and another key', async () => {
    const wrapped = await idp.respond({
      authnRequestUrl: requestUrl,
      email: 'a@acme.example',
      attack: 'xsw-extensions',
    });
    expect(await validate(wrapped)).toMatchObject({ ok: false, code: 'invalid_response', message: /one Assertion/ });
    const signingKey = await createSigningKey('attacker');
    const forged = await idp.respond({ authnRequestUrl: requestUrl, email: 'a@acme.example', signingKey });
    expect(await validate(forged)).toMatchObject({ ok: false, code: 'invalid_response', message: /does not verify/ });
  });
});
