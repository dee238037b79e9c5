import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { spUrls, ssoSecretBox } from '../sso/connection-settings.js';
import type { SsoFetchPolicy } from '../sso/fetch.js';

/** What single sign-on's sign-in is built from (src/auth/sso-plugin.ts), and what its protocol halves share. */

export interface SsoDeps {
  config: Config;
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** How the service reaches identity providers (docs/sso.md "Addresses"): the management routes' own policy. */
  policy: SsoFetchPolicy;
}

/** What a flow module needs: the connection's service-provider addresses and the outbound policy. */
export interface SsoContext extends SsoDeps {
  openSecret(sealed: string): Promise<string>;
  redirectUri(connectionId: string): string;
  samlSp(connectionId: string): { entityId: string; acsUrl: string };
}

export function ssoContext(deps: SsoDeps): SsoContext {
  const urls = spUrls(deps.config.auth.url);
  const secrets = ssoSecretBox(deps.config.auth.secret);
  return {
    ...deps,
    openSecret: (sealed) => secrets.open(sealed),
    redirectUri: (id) => urls(id).redirectUri,
    samlSp: (id) => {
      const { entityId, acsUrl } = urls(id);
      return { entityId, acsUrl };
    },
  };
}
