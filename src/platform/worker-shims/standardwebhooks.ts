/**
 * Workers bundle only (wrangler.toml `alias`): stands in for
 * `standardwebhooks`, which the `resend` SDK imports for
 * `webhooks.verify`. The service receives no Resend webhooks, so the
 * verifier stays out of the Worker. Node never sees this file.
 */
export class Webhook {
  constructor() {
    throw new Error('standardwebhooks is not bundled in the Worker (src/platform/worker-shims/standardwebhooks.ts)');
  }
}
