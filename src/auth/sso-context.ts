import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { createSecretBox } from '../shared/secret-box.js';
import type { SsoFetchPolicy } from '../sso/fetch.js';

/** What single sign-on's sign-in is built from (src/auth/sso-plugin.ts), and what its protocol halves share. */

export interface SsoDeps {
  config: Config;
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  ssoFetch: typeof fetch;
}

/** What a flow module needs: the connection's service-provider addresses and the outbound policy. */
export interface SsoContext extends SsoDeps {
  policy: SsoFetchPolicy;
  openSecret(sealed: string): Promise<string>;
  redirectUri(connectionId: string): string;
  samlSp(connectionId: string): { entityId: string; acsUrl: string };
}

export function ssoContext(deps: SsoDeps): SsoContext {
  const { config } = deps;
  const base = config.auth.url;
  const secrets = createSecretBox(config.auth.secret, 'gatehouse sso client secrets v1');
  return {
    ...deps,
    // docs/sso.md "Addresses": the rules discovery follows hold for every request of a sign-in.
    policy: {
      fetch: deps.ssoFetch,
      allowPrivateUrls: config.sso.allowPrivateUrls,
      httpsOnly: config.webhooks.httpsOnly,
    },
    openSecret: (sealed) => secrets.open(sealed),
    redirectUri: (id) => `${base}/api/auth/sso/callback/${id}`,
    samlSp: (id) => ({
      entityId: `${base}/api/sso/connections/${id}/saml-metadata`,
      acsUrl: `${base}/api/auth/sso/saml2/callback/${id}`,
    }),
  };
}
