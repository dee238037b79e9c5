/**
 * Workers bundle only (wrangler.toml `alias`): stands in for `postal-mime`,
 * which the `resend` SDK imports for `emails.receiving` (parsing inbound
 * mail). The service only sends (`emails.send`), so the parser stays out
 * of the Worker (with `standardwebhooks`, ~26 KiB gzipped). Node never sees
 * this file.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: stands in for the package's class export
export default class PostalMime {
  static parse(): never {
    throw new Error('postal-mime is not bundled in the Worker (src/platform/worker-shims/postal-mime.ts)');
  }
}
