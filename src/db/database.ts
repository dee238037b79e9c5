/**
 * The one source of table types (STYLE.md "Types flow from one place").
 * Column names are snake_case as in the migrations; JSON is camelCase.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface DB {}
