/**
 * Workers bundle only (wrangler.toml `alias`): stands in for
 * `@authenio/xml-encryption`, which samlify imports to encrypt and decrypt
 * assertions. The service refuses encrypted assertions before samlify reads
 * a response (src/sso/saml-response.ts), so it is never called here. Node
 * never sees this file.
 */
type Callback = (error: Error | null, result?: string) => void;

const unavailable = () =>
  new Error('@authenio/xml-encryption is not bundled in the Worker (src/platform/worker-shims/xml-encryption.ts)');

export function encrypt(_xml: string, _options: unknown, callback: Callback): void {
  callback(unavailable());
}

export function decrypt(_xml: string, _options: unknown, callback: Callback): void {
  callback(unavailable());
}
