/**
 * What the SCIM service refuses, in SCIM's terms (RFC 7644 section 3.12): an
 * HTTP status and, for a 400 or 409, the `scimType` that says why. The grammar
 * (filters, PATCH) and the routes throw it; the SCIM door renders it as
 * `{ schemas: [Error], status: "400", scimType, detail }`. It knows no HTTP
 * framework. `detail` is shown to the directory: it names the attribute or the
 * path at fault, never a secret.
 */

/** RFC 7644 section 3.12, Table 9, plus `tooMany` (section 3.4.2.4). */
export type ScimErrorType =
  | 'invalidFilter'
  | 'invalidPath'
  | 'noTarget'
  | 'mutability'
  | 'invalidValue'
  | 'invalidSyntax'
  | 'uniqueness'
  | 'tooMany';

export class ScimError extends Error {
  constructor(
    readonly status: number,
    readonly scimType: ScimErrorType | undefined,
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'ScimError';
  }
}

/** A request the grammar refuses: 400 with its scimType. */
export const badRequest = (scimType: ScimErrorType, detail: string): ScimError => new ScimError(400, scimType, detail);
