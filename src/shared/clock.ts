/** A source of "now": real time in production, a fixed or advancing clock in tests. */
export type Clock = () => Date;
